"""An HTTP server for the tests of reading URLs: files of a directory, byte ranges, an ETag, added latency,
and what it sent counted on its side.

``served(directory, latency=0.01)`` is a context manager giving a :class:`Server`: ``server.url(name)`` is a
file's URL, ``server.sent`` the body bytes sent, ``server.requests`` the GET requests answered, and
``server.fail_next(n, status)`` makes the next ``n`` GET requests fail. ``GET /__stats`` answers the two
counts as JSON (``/__reset`` zeroes them first), for a client in another process; ``python
_http_server.py DIRECTORY LATENCY`` serves until killed, printing its port.

It answers HEAD and GET, ``Range: bytes=a-b`` (one range; 206 with ``Content-Range``), and ``If-Match``
(412 when the file's ETag, made of its size and modification time, is another).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import threading
import time
from collections.abc import Iterator

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class Server:
    """What a test asks of the running server (see the module)."""

    def __init__(self, directory: str, latency: float) -> None:
        self.directory = directory
        self.latency = latency
        self.sent = 0
        self.requests = 0
        self.ranges: list[tuple[int, int]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self.port = 0

    def url(self, name: str) -> str:
        """The URL of the file ``name`` of the directory."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` GET requests with ``status``."""
        with self._lock:
            self._failures += [status] * count

    def reset(self) -> None:
        """Count from zero."""
        with self._lock:
            self.sent = self.requests = 0
            self.ranges.clear()

    def _count(self, start: int, end: int) -> None:
        with self._lock:
            self.sent += end - start
            self.requests += 1
            self.ranges.append((start, end))

    def _failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None


def _etag(info: os.stat_result) -> str:
    return f'"{info.st_size:x}-{info.st_mtime_ns:x}"'


def _handler(server: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _file(self) -> tuple[str, os.stat_result] | None:
            path = os.path.join(server.directory, self.path.lstrip("/").split("?")[0])
            if not os.path.isfile(path):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            return path, os.stat(path)

        def do_HEAD(self) -> None:
            time.sleep(server.latency)
            found = self._file()
            if found is None:
                return
            self.send_response(200)
            self.send_header("Content-Length", str(found[1].st_size))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", _etag(found[1]))
            self.end_headers()

        def do_GET(self) -> None:
            if self.path in ("/__stats", "/__reset"):  # for a client in another process
                if self.path == "/__reset":
                    server.reset()
                body = json.dumps({"sent": server.sent, "requests": server.requests}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            time.sleep(server.latency)
            failure = server._failure()
            if failure is not None:
                self.send_response(failure)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            found = self._file()
            if found is None:
                return
            path, info = found
            wanted = self.headers.get("If-Match")
            if wanted is not None and wanted != _etag(info):
                self.send_response(412)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start, end, status = 0, info.st_size, 200
            match = _RANGE.match(self.headers.get("Range", ""))
            if match:
                start = int(match.group(1))
                end = min(int(match.group(2)) + 1, info.st_size) if match.group(2) else info.st_size
                status = 206
            with open(path, "rb") as file:
                file.seek(start)
                body = file.read(max(end - start, 0))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", _etag(info))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{info.st_size}")
            self.end_headers()
            self.wfile.write(body)
            server._count(start, start + len(body))

    return Handler


class _Listening(http.server.ThreadingHTTPServer):
    request_queue_size = 1024  # clients open many connections at once (socketserver's default is 5)
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that closes its connection early is no error of the server's


@contextlib.contextmanager
def served(directory: str, latency: float = 0.0) -> Iterator[Server]:
    """Serve ``directory`` on a free local port while the block runs."""
    server = Server(os.fspath(directory), latency)
    httpd = _Listening(("127.0.0.1", 0), _handler(server))
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()


if __name__ == "__main__":
    import sys

    with served(sys.argv[1], float(sys.argv[2])) as running:
        print(running.port, flush=True)
        threading.Event().wait()
