# Generated from hutch/_async/__init__.py by scripts/unasync.py: edit that file, then run the script.
"""The client's classes (hutch/_async is the source hutch/_sync is generated from)."""

from ._box import Box, Files, FileStream, BoxPolicy, Ports, Processes
from ._client import (Boxes, Client, Keys, Registries, Secrets,
                      Templates)
from ._exec import ExecSession

__all__ = ["Box", "Boxes", "Client", "ExecSession", "Files",
           "FileStream", "Keys", "BoxPolicy", "Ports", "Processes",
           "Registries", "Secrets", "Templates"]
