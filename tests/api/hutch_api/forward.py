"""A loopback TCP port relayed to hutchd's unix socket, for tools that speak only TCP
(schemathesis uses requests). Binds 127.0.0.1 only; stops with the process or stop()."""

from __future__ import annotations

import selectors
import socket
import threading


class UnixForwarder:
    def __init__(self, unix_path: str):
        self.unix_path = unix_path
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "UnixForwarder":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        try:
            self.listener.close()
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pump, args=(client,), daemon=True).start()

    def _pump(self, client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.unix_path)
        except OSError:
            client.close()
            return
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        open_ends = 2
        try:
            while open_ends and not self._stop.is_set():
                for key, _ in sel.select(timeout=1.0):
                    src, dst = key.fileobj, key.data
                    try:
                        data = src.recv(65536)
                    except OSError:
                        data = b""
                    if data:
                        try:
                            dst.sendall(data)
                        except OSError:
                            return
                    else:
                        sel.unregister(src)
                        open_ends -= 1
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
        finally:
            sel.close()
            client.close()
            upstream.close()
