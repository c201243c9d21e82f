"""The client: one connection to hutchd, its resources as attributes."""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat
from typing import Any, AsyncGenerator, AsyncIterator, Callable, List, Mapping, Sequence, TypeVar

import httpx

from .. import _api, _tar
from .._api import Call
from .._connection import Connection, resolve
from .._errors import (
    HutchError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
    error_from_response,
)
from .._failures import map_transport_error
from .._models import BoxInfo, Info, Key, RegistryLogin, Secret, Template, from_json
from . import _backend
from ._box import AsyncBox

T = TypeVar("T")


class AsyncClient:
    """A connection to hutchd.

    With no arguments it reads ``HUTCH_HOST`` (``https://HOST:PORT`` or
    ``http://127.0.0.1:PORT``) and ``HUTCH_API_KEY``; without ``HUTCH_HOST`` it uses the unix
    socket (``HUTCH_SOCKET``, default /run/hutch/hutchd.sock). ``ca_cert`` (``HUTCH_CA_CERT``)
    is a PEM file to trust; ``fingerprint`` (``HUTCH_FINGERPRINT``) pins the server
    certificate's SHA-256 as ``GET /v1/info`` prints it, and a different certificate is refused
    before the key is sent. ``timeout`` bounds each request in seconds (default: none, since
    creating a box or building a template takes a while); connecting has ``connect_timeout``.
    ``transport`` replaces the HTTP transport (tests); the WebSocket exec does not use it.
    Nothing is retried.
    """

    def __init__(self, host: str | None = None, api_key: str | None = None,
                 socket: str | os.PathLike[str] | None = None, ca_cert: str | None = None,
                 fingerprint: str | None = None, *, timeout: float | None = None,
                 connect_timeout: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._conn: Connection = resolve(
            host=host, api_key=api_key, socket=os.fspath(socket) if socket is not None else None,
            ca_cert=ca_cert, fingerprint=fingerprint, timeout=timeout,
            connect_timeout=connect_timeout)
        self._http = _backend.http_client(self._conn, transport)
        self.boxes = AsyncBoxes(self)
        self.templates = AsyncTemplates(self)
        self.secrets = AsyncSecrets(self)
        self.registries = AsyncRegistries(self)
        self.keys = AsyncKeys(self)

    @property
    def base_url(self) -> str:
        """``https://HOST:PORT``, ``http://...``, or ``http://hutchd`` on the unix socket."""
        return self._conn.base_url

    @property
    def socket(self) -> str | None:
        """The unix socket in use, or None on TCP."""
        return self._conn.socket

    async def info(self) -> Info:
        """``GET /v1/info``: version, backend, acceleration, TLS fingerprint, who you are."""
        return await self._call(_api.info())

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self._conn.where!r})"

    # --- transport (used by the resources) ---------------------------------------------

    async def _call(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(
                call.method, call.path, params=call.params, json=call.json,
                headers=call.headers or None)
        except httpx.TransportError as e:
            raise map_transport_error(e, self._conn) from e
        return _api.finish(call, response.status_code, response.content, response.headers)

    @contextlib.asynccontextmanager
    async def _stream(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      headers: Mapping[str, str] | None = None, content: Any = None,
                      ) -> AsyncIterator[httpx.Response]:
        """A request whose answer is read as a stream; an error status raises its class."""
        request = self._http.build_request(method, path, params=params, headers=headers,
                                           content=content)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise map_transport_error(e, self._conn) from e
        try:
            if response.status_code >= 400:
                try:
                    body = await response.aread()
                except httpx.TransportError:
                    body = b""
                raise error_from_response(response.status_code, body, response.headers)
            yield response
        finally:
            await response.aclose()

    async def _chunks(self, response: httpx.Response) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.TransportError as e:
            raise map_transport_error(e, self._conn) from e

    async def _lines(self, response: httpx.Response) -> AsyncGenerator[str, None]:
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.TransportError as e:
            raise map_transport_error(e, self._conn) from e

    async def _ws(self, path: str, subprotocol: str) -> _backend.ClientConnection:
        return await _backend.ws_connect(self._conn, path, subprotocol)


class AsyncBoxes:
    """``client.boxes``: create, list and get boxes."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, template: str | None = None, cpus: int | None = None,
                     memory: int | str | None = None, disk: int | str | None = None,
                     network_policy: str | Mapping[str, Any] | None = None,
                     secrets: Sequence[str] | None = None,
                     env: Mapping[str, str] | Sequence[str] | None = None,
                     name: str | None = None) -> AsyncBox:
        """Creates a box and returns once its guest agent answers.

        ``memory`` and ``disk`` are MiB (an int) or sizes such as ``"512M"``, ``"2G"``;
        ``network_policy`` a preset (``"none"``, ``"allow-all"``, ``"debian-mirrors"``) or a
        policy dict; ``secrets`` names of stored secrets; ``env`` variables every exec and
        process in the box gets. Unset arguments take hutchd's defaults.
        """
        info = await self._client._call(_api.create_box(
            template=template, cpus=cpus, memory=memory, disk=disk,
            network_policy=network_policy, secrets=secrets, env=env, name=name))
        return AsyncBox(self._client, info)

    async def list(self) -> List[AsyncBox]:
        return [AsyncBox(self._client, info)
                for info in await self._client._call(_api.list_boxes())]

    async def get(self, box: str) -> AsyncBox:
        """A box by name, id or unique id prefix."""
        return AsyncBox(self._client, await self._client._call(_api.get_box(box)))

    async def info(self, box: str) -> BoxInfo:
        return await self._client._call(_api.get_box(box))


class AsyncTemplates:
    """``client.templates``: shared by every key; only admins build or remove them."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self) -> List[Template]:
        return await self._client._call(_api.list_templates())

    async def get(self, name: str) -> Template:
        for template in await self.list():
            if template.name == name:
                return template
        raise NotFoundError(f"No template named {name!r}", status=404)

    async def build(self, name: str, on_progress: Callable[[str], Any] | None = None, *,
                    context: str | os.PathLike[str] | None = None,
                    dockerfile: str | os.PathLike[str] | None = None,
                    dockerfile_content: str | bytes | None = None,
                    build_args: Mapping[str, str] | None = None, target: str | None = None,
                    no_cache: bool = False, start_cmd: str | None = None,
                    ready_cmd: str | None = None,
                    network_policy: str | Mapping[str, Any] | None = None,
                    secrets: Sequence[str] | None = None,
                    cpus: int | None = None, memory: int | str | None = None,
                    disk: int | str | None = None,
                    step_timeout: float | None = None) -> Template:
        """Builds template ``name``; ``on_progress`` gets each line of the build's log as it
        goes (the NDJSON stream).

        With ``context`` (a local directory), ``dockerfile`` (a local path, default
        ``CONTEXT/Dockerfile``) or ``dockerfile_content`` (the Dockerfile's text), it builds a
        Dockerfile (``POST /v1/builds``, as ``hutch template build NAME -f FILE CONTEXT``):
        the context is sent as a tar made while it is sent (hutchd leaves out what its
        ``.dockerignore`` names), and every step runs in a box on hutchd's host.
        ``build_args`` are ARG values, ``target`` the stage to build, ``no_cache`` runs every
        step again, ``start_cmd``/``ready_cmd`` a process the template's boxes start with and
        the check polled until it is ready, ``network_policy`` the egress of the RUN steps,
        ``secrets`` the host secrets they may use (as a box's; none reaches the template, and
        such a build caches no step), ``cpus``/``memory``/``disk`` the build box's size (MiB or ``"2G"``), ``step_timeout``
        seconds per step. A Dockerfile hutchd cannot read is an :class:`InvalidArgumentError`
        naming its line, a failed step an error naming the step.

        Without any of those it builds hutch's recipe ``images/NAME`` on the host."""
        if context is None and dockerfile is None and dockerfile_content is None:
            extra = dict(build_args=build_args, target=target, start_cmd=start_cmd,
                         ready_cmd=ready_cmd, network_policy=network_policy,
                         secrets=secrets, cpus=cpus,
                         memory=memory, disk=disk, step_timeout=step_timeout)
            given = sorted(k for k, v in extra.items() if v is not None)
            if given or no_cache:
                raise InvalidArgumentError(
                    f"{', '.join(given or ['no_cache'])} apply to Dockerfile builds: give "
                    f"context=, dockerfile= or dockerfile_content= (without them, build() "
                    f"builds recipe images/{name})")
            call = _api.create_template(name)
            return await self._stream_template(
                "POST", call.path, f"The build of template {name!r}", on_progress,
                content=_api.json_body(call.json), content_type="application/json")
        plan = _tar.build_context(context, dockerfile, dockerfile_content)
        params = _api.build_params(
            name, plan.dockerfile, build_args=build_args, target=target, no_cache=no_cache,
            start_cmd=start_cmd, ready_cmd=ready_cmd, network_policy=network_policy,
            secrets=secrets, cpus=cpus, memory=memory, disk=disk, step_timeout=step_timeout)
        return await self._stream_template(
            "POST", "/v1/builds", f"The build of template {name!r}", on_progress,
            params=params, content=_backend.iterate_blocking(plan.stream()),
            content_type="application/x-tar")

    async def create(self, name: str, from_box: str | AsyncBox | None = None, *,
                     from_image: str | None = None,
                     from_archive: Any = None, image: str | None = None,
                     systemd: bool = False,
                     on_progress: Callable[[str], Any] | None = None) -> Template:
        """Makes template ``name`` from one source (admins only):

        - ``from_box``: freezes that stopped box;
        - ``from_image``: pulls an OCI or Docker image from a registry hutchd reaches
          (``"python:3.12-slim"``, ``"registry.example:5000/team/app:1"``, ``"NAME@sha256:..."``;
          credentials are the host's, ``hutch registry login``);
        - ``from_archive``: an image archive sent from here, streamed: a local path (a
          ``docker save`` tar or an OCI archive, plain or compressed, or an OCI image layout
          directory), a binary file object or an iterable of bytes. ``image`` picks one image
          of an archive that holds several (a tag, or ``"@N"``).

        ``systemd=True`` (from an image or an archive) boots the image's own systemd as PID 1,
        with hutch-agent as its service, as hutch's ``systemd`` template does; an image without
        systemd is refused.

        ``on_progress`` gets each progress line of a pull or an import as it comes."""
        given = [k for k, v in (("from_box", from_box), ("from_image", from_image),
                                ("from_archive", from_archive)) if v is not None]
        if len(given) != 1:
            raise InvalidArgumentError(
                "Give one of from_box, from_image and from_archive" if not given else
                f"Give one of from_box, from_image and from_archive, not {' and '.join(given)}")
        if image is not None and from_archive is None:
            raise InvalidArgumentError("image picks an image of an archive: it goes with "
                                       "from_archive")
        if from_box is not None:
            box = from_box.id if isinstance(from_box, AsyncBox) else from_box
            return await self._client._call(_api.create_template(name, box, systemd=systemd))
        if from_image is not None:
            call = _api.create_template(name, from_image=from_image, systemd=systemd)
            return await self._stream_template(
                "POST", call.path, f"The pull of {from_image} as template {name!r}", on_progress,
                content=_api.json_body(call.json), content_type="application/json")
        path = _api.template_archive_path(name)
        params = _api.archive_params(image, systemd)
        content, length = _archive_body(from_archive)
        return await self._stream_template(
            "POST", path, f"The import of the archive as template {name!r}", on_progress,
            params=params, content=content, content_type="application/x-tar",
            content_length=length)

    async def _stream_template(self, method: str, path: str, what: str,
                               on_progress: Callable[[str], Any] | None, *,
                               content: Any, content_type: str,
                               params: Mapping[str, str] | None = None,
                               content_length: int | None = None) -> Template:
        """Sends a template creation asking for NDJSON progress; the template it ends with."""
        headers = {"Accept": "application/x-ndjson", "Content-Type": content_type}
        if content_length is not None:
            headers["Content-Length"] = str(content_length)
        async with self._client._stream(method, path, params=params, content=content,
                                        headers=headers) as response:
            streamed = (response.status_code == 200
                        or "ndjson" in response.headers.get("content-type", ""))
            if not streamed:
                # 201: a hutchd without streaming answers once, when the template is made.
                return _api.finish(_api.Call(method, path, lambda d: from_json(Template, d)),
                                   response.status_code, await response.aread(),
                                   response.headers)
            template: Template | None = None
            failure: HutchError | None = None
            # Read to the end (hutchd closes after the result): leaving the loop early would
            # leave httpx's line iterators unfinished.
            async for line in self._client._lines(response):
                if not line.strip() or template is not None or failure is not None:
                    continue
                try:
                    kind, value = _api.build_line(line)
                except HutchError as e:
                    failure = e
                    continue
                if kind == "progress":
                    if on_progress is not None:
                        await _backend.call_back(on_progress, value)
                else:
                    template = value
        if failure is not None:
            raise failure
        if template is None:
            raise UnavailableError(f"{what} ended without a result (the connection closed)")
        return template

    async def remove(self, name: str) -> None:
        await self._client._call(_api.remove_template(name))


def _archive_body(source: Any) -> tuple[Any, int | None]:
    """An image archive as a request body, streamed: a path (a file as it is, an OCI layout
    directory as a tar made on the fly), a binary file object, bytes or an iterable of bytes.
    A regular file's length is announced, so hutchd refuses one past its limit before it is
    sent."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            st = os.stat(path)
        except OSError as e:
            raise InvalidArgumentError(f"Cannot read the image archive {path}: "
                                       f"{e.strerror}") from e
        if stat.S_ISDIR(st.st_mode):
            if not os.path.isfile(os.path.join(path, "index.json")):
                raise InvalidArgumentError(
                    f"{path} is a directory without index.json: give an OCI image layout, or "
                    f"a docker save archive as a file")
            return _backend.iterate_blocking(_tar.tar_stream(path)), None
        if not stat.S_ISREG(st.st_mode):
            return _backend.body_source(pathlib.Path(path)), None
        return _backend.body_source(pathlib.Path(path)), st.st_size
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), None
    try:
        return _backend.body_source(source), None
    except TypeError as e:
        raise InvalidArgumentError(f"from_archive is a path, a binary file or an iterable of "
                                   f"bytes, not {type(source).__name__}") from e


class AsyncSecrets:
    """``client.secrets``: values go in, never out; a box uses only its owner's secrets."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self) -> List[Secret]:
        return await self._client._call(_api.list_secrets())

    async def set(self, name: str, value: str, domains: Sequence[str], *,
                  header: str | None = None, format: str | None = None) -> Secret:
        return await self._client._call(_api.set_secret(name, value, domains, header, format))

    async def remove(self, name: str) -> None:
        await self._client._call(_api.remove_secret(name))


class AsyncRegistries:
    """``client.registries``: credentials hutchd pulls images with (admin), as ``docker login``
    keeps them; no box sees them."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self) -> List[RegistryLogin]:
        return await self._client._call(_api.list_registries())

    async def login(self, registry: str, username: str, password: str) -> RegistryLogin:
        return await self._client._call(_api.login_registry(registry, username, password))

    async def logout(self, registry: str) -> None:
        await self._client._call(_api.logout_registry(registry))


class AsyncKeys:
    """``client.keys``: API keys, for the host administrator and admin keys."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, name: str, *, admin: bool = False, max_boxes: int | None = None,
                     max_cpus: int | None = None, max_memory: int | str | None = None,
                     max_disk: int | str | None = None) -> Key:
        """Makes a key; the answer's ``key`` is the secret, shown this once."""
        return await self._client._call(_api.create_key(
            name, admin=admin, max_boxes=max_boxes, max_cpus=max_cpus, max_memory=max_memory,
            max_disk=max_disk))

    async def list(self) -> List[Key]:
        return await self._client._call(_api.list_keys())

    async def remove(self, name: str) -> None:
        await self._client._call(_api.remove_key(name))
