"""Real HTTP servers on 127.0.0.1 for the remote-source tests and benchmark (no internet).

* :class:`FileServer` serves a folder with ``Range`` (206 + ``Content-Range``), ``HEAD``, ``ETag``
  and ``If-None-Match`` (304), as a CDN or ``python -m http.server`` behind nginx does.
* :class:`FakeHub` is the few Hugging Face Hub endpoints ``huggingface_hub`` and tensorviz call:
  ``/api/models/{repo}/revision/{rev}`` (the commit and the file list), and
  ``/{repo}/resolve/{rev}/{path}`` (``HEAD`` with ``X-Repo-Commit``/``ETag``, ``GET`` with ranges),
  over folders of files per commit; a repository may be private (401 without the token, with the
  Hub's ``X-Error-Message``).
* A hostile server is a :class:`FileServer` with a ``behave`` hook that answers a request its own
  way (a lying ``Content-Range``, a trickle, a redirect loop...).

Every server counts the requests and the body bytes it sends (``stats``), so a test can assert
what reading a source cost.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.bytes = 0

    def add(self, method: str, path: str, rng: str | None, n: int) -> None:
        with self.lock:
            self.requests.append((method, path, rng))
            self.bytes += n

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bytes = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, head: bool) -> None:
        srv = self.server
        if srv.behave is not None and srv.behave(self):
            return
        found = srv.route(self)
        if found == "answered":  # the route sent its own answer (the fake Hub's endpoints)
            return
        if found is None:
            return self.send_plain(404, b"not found", {"X-Error-Message": "Entry not found"})
        path, extra = found
        self.send_file(path, head, extra)

    def send_plain(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        # Counted before the answer leaves: a client that has its answer sees it counted.
        self.server.stats.add(
            self.command, self.path, self.headers.get("Range"), len(body) if self.command != "HEAD" else 0
        )
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_file(self, path: str, head: bool, extra: dict[str, str]) -> None:
        size = os.path.getsize(path)
        etag = '"' + _etag(path) + '"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.server.stats.add(self.command, self.path, self.headers.get("Range"), 0)
            self.end_headers()
            return
        rng = self.headers.get("Range")
        m = _RANGE.match(rng or "")
        start, stop = 0, size
        status = 200
        if m and not head:
            start = int(m.group(1))
            stop = min(size, int(m.group(2)) + 1) if m.group(2) else size
            if start >= size:
                return self.send_plain(416, b"", {"Content-Range": f"bytes */{size}"})
            status = 206
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        for k, v in extra.items():
            self.send_header(k, v)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        self.send_header("Content-Length", str(stop - start))
        data = b""
        if not head:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read(stop - start)
        self.server.stats.add(self.command, self.path, rng, len(data))
        self.end_headers()
        self.wfile.write(data)


def _etag(path: str) -> str:
    st = os.stat(path)
    return hashlib.sha1(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # as real servers: the default 5 drops concurrent SYNs (1 s retries)

    def __init__(self, route: Callable, behave: Callable | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.route, self.behave, self.stats = route, behave, _Stats()


class _Running:
    """A server in a thread; ``url`` is its base, ``stats`` what it served; a context manager."""

    def __init__(self, route: Callable, behave: Callable | None = None) -> None:
        self.httpd = _Server(route, behave)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def stats(self) -> _Stats:
        return self.httpd.stats

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class FileServer(_Running):
    """Serves ``root`` at ``/``, with ranges, ETags and conditional requests."""

    def __init__(self, root: str, behave: Callable | None = None) -> None:
        self.root = os.path.realpath(root)

        def route(h: _Handler):
            rel = unquote(urlsplit(h.path).path).lstrip("/")
            p = os.path.realpath(os.path.join(self.root, rel))
            if not p.startswith(self.root + os.sep) or not os.path.isfile(p):
                return None
            return p, {}

        super().__init__(route, behave)


class FakeHub(_Running):
    """The Hub's revision-info and resolve endpoints over ``repos``:
    ``{repo_id: {"commits": {sha: folder}, "refs": {"main": sha, ...}, "token": None | str}}``."""

    def __init__(self, repos: dict, behave: Callable | None = None) -> None:
        self.repos = repos

        def route(h: _Handler):
            path = unquote(urlsplit(h.path).path)
            m = re.match(r"^/api/models/([^/]+/[^/]+)/revision/(.+)$", path)
            if m:
                return self._api(h, m.group(1), m.group(2))
            m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
            if m:
                return self._resolve(h, m.group(1), m.group(2), m.group(3))
            return None

        super().__init__(route, behave)

    def _repo(self, h: _Handler, repo_id: str, rev: str):
        repo = self.repos.get(repo_id)
        if repo is None:
            h.send_plain(
                404,
                b'{"error":"Repository not found"}',
                {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
            )
            return None
        token = repo.get("token")
        if token and h.headers.get("Authorization") != f"Bearer {token}":
            h.send_plain(
                401,
                b"",
                {
                    "X-Error-Code": "GatedRepo",
                    "X-Error-Message": "Access to model "
                    + repo_id
                    + " is restricted. You must have access to it and be authenticated to access it. Please log in.",
                },
            )
            return None
        sha = repo["refs"].get(rev, rev)
        if sha not in repo["commits"]:
            h.send_plain(404, b"", {"X-Error-Code": "RevisionNotFound", "X-Error-Message": f"Invalid rev id: {rev}"})
            return None
        return sha, repo["commits"][sha]

    def _api(self, h: _Handler, repo_id: str, rev: str):
        found = self._repo(h, repo_id, rev)
        if found is None:
            return "answered"
        sha, folder = found
        files = sorted(
            os.path.relpath(os.path.join(d, f), folder).replace(os.sep, "/") for d, _, fs in os.walk(folder) for f in fs
        )
        body = json.dumps({"id": repo_id, "sha": sha, "siblings": [{"rfilename": f} for f in files]}).encode()
        h.send_plain(200, body, {"Content-Type": "application/json"})
        return "answered"

    def _resolve(self, h: _Handler, repo_id: str, rev: str, rel: str):
        found = self._repo(h, repo_id, rev)
        if found is None:
            return "answered"
        sha, folder = found
        p = os.path.realpath(os.path.join(folder, rel))
        if not p.startswith(os.path.realpath(folder) + os.sep) or not os.path.isfile(p):
            h.send_plain(404, b"", {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})
            return "answered"
        etag = '"' + _etag(p) + '"'
        h.send_file(
            p,
            h.command == "HEAD",
            {"X-Repo-Commit": sha, "X-Linked-Etag": etag, "X-Linked-Size": str(os.path.getsize(p))},
        )
        return "answered"
