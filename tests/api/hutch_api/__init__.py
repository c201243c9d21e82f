"""Test support for hutchd's HTTP API: every response checked against docs/openapi.yaml.

- validator.SpecValidator: one request and its response against the spec (openapi-core).
- client: httpx clients (unix socket or TCP) whose transport validates every response.
- frames: the hutch frame codec, for the upgraded exec connection.
- daemon: starts a hutchd for the tests (tests/support/hutchd_daemon.py when present).
"""
