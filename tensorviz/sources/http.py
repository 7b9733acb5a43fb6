"""Bounded HTTP(S) range requests with the standard library: the transport of remote sources.

A server is as untrusted as a file. Every request here is bounded in bytes (a body is read up to
what was asked, never more), in time (a watchdog closes the connection at the deadline, so a
server that trickles its status line, headers or body one byte at a time cannot hold a request
past ``timeout``), and in redirects (at most :data:`MAX_REDIRECTS`, never from https to http,
never to another scheme, never in a loop). What the server says about the bytes it sends is
checked: a ``206`` answer's ``Content-Range`` must be the range asked for (clipped only at the
file's end), a declared length must be what arrives. A server that ignores ``Range`` and
answers ``200`` with the whole file is read only for the bytes asked for, then the connection is
closed. Errors are :class:`~tensorviz.core.errors.RemoteError`, naming the URL, what the server
did and the fix; a Hub error (401, 403, 404, 429…) quotes the Hub's own message, escaped and
bounded.

Standard library only (``http.client``, ``ssl``): no requests, no httpx, no torch.
"""

from __future__ import annotations

import heapq
import http.client
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from tensorviz.core.errors import RemoteError, TooLargeError
from tensorviz.core.names import elide, terminal

__all__ = ["Meter", "Response", "MAX_REDIRECTS", "get_range", "get_all", "head"]

MAX_REDIRECTS = 5
_CHUNK = 1 << 16
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")


@dataclass
class Meter:
    """What one source cost: requests made and body bytes received, under stated limits.

    Shared by the threads reading one index's shards (a lock guards the counts). A limit the
    source would cross raises :class:`~tensorviz.core.errors.TooLargeError` naming it and how to
    raise it (``max_requests=`` / ``max_bytes=`` of ``tv.analyze``).
    """

    max_requests: int = 10_000
    max_bytes: int = 1 << 30
    timeout: float = 10.0
    requests: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _idle: dict = field(default_factory=dict, repr=False, compare=False)  # server -> kept-alive connections

    def take(self, key: tuple) -> http.client.HTTPConnection | None:
        """A kept-alive connection to this server from an earlier request of this source."""
        with self._lock:
            conns = self._idle.get(key)
            return conns.pop() if conns else None

    def give(self, key: tuple, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.setdefault(key, []).append(conn)

    def close(self) -> None:
        """Close every kept-alive connection: a source keeps none once it has been read."""
        with self._lock:
            conns = [c for cs in self._idle.values() for c in cs]
            self._idle.clear()
        for c in conns:
            c.close()

    def request(self, url: str) -> None:
        with self._lock:
            if self.requests >= self.max_requests:
                raise TooLargeError(
                    f"{_show(url)}: reading this source needs more than {self.max_requests} requests; "
                    f"pass remote_limits={{'max_requests': N}} to tv.analyze to allow more"
                )
            self.requests += 1

    def received(self, url: str, n: int) -> None:
        with self._lock:
            self.bytes += n
            if self.bytes > self.max_bytes:
                raise TooLargeError(
                    f"{_show(url)}: reading this source's headers needs more than {self.max_bytes} bytes; "
                    f"pass remote_limits={{'max_bytes': N}} to tv.analyze to allow more"
                )

    def left(self, url: str, n: int) -> int:
        """``n``, checked against the bytes this source may still receive."""
        if self.bytes + n > self.max_bytes:
            self.received(url, n)  # raises, naming the limit
        return n


@dataclass(frozen=True)
class Response:
    """A bounded answer: the body bytes received (at most what was asked), and what the server
    said of the file: its total size (from ``Content-Range`` or ``Content-Length``), ETag, the
    Hub's commit (``X-Repo-Commit``) and the URL finally answered (after redirects)."""

    status: int
    body: bytes
    size: int | None
    etag: str | None
    commit: str | None
    url: str


def _show(url: str) -> str:
    """A URL as messages quote it: escaped, query string (it may carry a signature) dropped."""
    parts = urlsplit(url)
    return terminal(elide(f"{parts.scheme}://{parts.netloc}{parts.path}", 300))


def get_range(url: str, start: int, stop: int, meter: Meter, headers: Mapping[str, str] | None = None) -> Response:
    """The bytes ``[start, stop)`` of the file at ``url`` (fewer only where the file ends).

    Raises:
        RemoteError: the server answered an error status, lied about the range or the length,
            redirected where tensorviz does not follow, was too slow, or the connection failed.
    """
    want = stop - start
    hdrs = {**(headers or {}), "Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
    return _fetch("GET", url, hdrs, meter, lambda resp, final: _range_body(resp, final, start, want, meter))


def get_all(url: str, limit: int, meter: Meter, headers: Mapping[str, str] | None = None) -> Response:
    """The whole (small) file at ``url``: an index or a listing, refused past ``limit`` bytes."""
    hdrs = {**(headers or {}), "Accept-Encoding": "identity"}
    return _fetch("GET", url, hdrs, meter, lambda resp, final: _whole_body(resp, final, limit, meter))


def head(url: str, meter: Meter, headers: Mapping[str, str] | None = None) -> Response:
    """The server's facts about ``url`` (status, size, ETag, commit) without a body."""
    return _fetch("HEAD", url, dict(headers or {}), meter, lambda resp, final: _answer(resp, final, b"", None))


# -- one request, its redirects and its deadline ---------------------------------------------------
def _fetch(method: str, url: str, headers: dict[str, str], meter: Meter, read) -> Response:
    deadline = time.monotonic() + meter.timeout
    seen: list[str] = []
    first_host = urlsplit(url).netloc
    while True:
        _check_scheme(url, seen)
        seen.append(url)
        meter.request(url)
        if urlsplit(url).netloc != first_host:  # credentials go to the host they were meant for
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        with _Connection(url, deadline, meter) as conn:
            resp = conn.send(method, headers)
            if resp.status in (301, 302, 303, 307, 308):
                url = _redirect(url, resp, seen)
                continue
            if resp.status >= 400:
                err = RemoteError(_status_message(url, resp, conn))
                err.status = resp.status
                raise err
            answer = conn.guard(lambda resp=resp, url=url: read(resp, url))
            conn.reusable = resp.isclosed() and not resp.will_close  # read to its end: keep it
            return answer


def _check_scheme(url: str, seen: list[str]) -> None:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise RemoteError(f"{_show(seen[-1])} redirects to {_show(url)}: tensorviz follows only http(s) redirects")
    if seen and scheme == "http" and urlsplit(seen[-1]).scheme.lower() == "https":
        raise RemoteError(
            f"{_show(seen[-1])} redirects from https to plain http ({_show(url)}); tensorviz does not "
            f"downgrade a secure connection: ask the server's owner for an https location"
        )


def _redirect(url: str, resp: http.client.HTTPResponse, seen: list[str]) -> str:
    location = resp.getheader("Location")
    if not location:
        raise RemoteError(f"{_show(url)}: the server answered {resp.status} (a redirect) without a Location")
    target = urljoin(url, location.strip())
    if target in seen:
        raise RemoteError(f"{_show(url)}: redirects loop back to {_show(target)}")
    if len(seen) > MAX_REDIRECTS:
        raise RemoteError(f"{_show(seen[0])}: more than {MAX_REDIRECTS} redirects (last to {_show(target)})")
    return target


class _Watchdog:
    """One thread that shuts each armed connection's socket at its deadline, which ends any read
    still waiting: a server trickling bytes keeps each single read short, so per-read socket
    timeouts alone would never fire. One thread for every request (not a timer thread each)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.heap: list[tuple[float, int, _Connection]] = []
        self.count = 0
        self.thread: threading.Thread | None = None

    def arm(self, conn: _Connection) -> int:
        with self.cond:
            self.count += 1
            heapq.heappush(self.heap, (conn.deadline, self.count, conn))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="tensorviz-http-watchdog", daemon=True)
                self.thread.start()
            self.cond.notify()
            return self.count

    def _run(self) -> None:
        with self.cond:
            while True:
                now = time.monotonic()
                while self.heap and (self.heap[0][2].done or self.heap[0][0] <= now):
                    _, _, conn = heapq.heappop(self.heap)
                    if not conn.done:
                        conn.expire()
                if not self.heap:
                    if not self.cond.wait(30.0) and not self.heap:
                        self.thread = None
                        return
                else:
                    self.cond.wait(self.heap[0][0] - now)


_WATCHDOG = _Watchdog()
_CONTEXTS: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


def _tls_context() -> ssl.SSLContext:
    """One verifying context per CA setting (building one reads the CA store: milliseconds)."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = _CONTEXTS[key] = ssl.create_default_context()
    return ctx


class _Connection:
    """One request's connection, under the watchdog's deadline. A connection whose answer was
    read to its end is kept alive for the thread's next request to the same server."""

    def __init__(self, url: str, deadline: float, meter: Meter) -> None:
        parts = urlsplit(url)
        self.url, self.deadline, self.timeout, self.meter = url, deadline, meter.timeout, meter
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.key = (parts.scheme.lower(), parts.hostname or "", parts.port)
        kept = meter.take(self.key)
        self.reused = kept is not None
        self.conn: http.client.HTTPConnection = kept if kept is not None else self._new()
        self.expired = self.done = False
        self.reusable = False

    def _new(self) -> http.client.HTTPConnection:
        scheme, host, port = self.key
        left = max(0.001, self.deadline - time.monotonic())
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=left, context=_tls_context())
        return http.client.HTTPConnection(host, port, timeout=left)

    def __enter__(self) -> _Connection:
        _WATCHDOG.arm(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done = True
        if self.reusable and not self.expired and exc[0] is None:
            self.meter.give(self.key, self.conn)
        else:
            self.conn.close()

    def expire(self) -> None:
        self.expired = True
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(2)
            except OSError:
                pass

    def send(self, method: str, headers: Mapping[str, str]) -> http.client.HTTPResponse:
        if self.reused:  # the server may have closed a kept-alive connection: retry once, fresh
            try:
                return self._send(method, headers)
            except (http.client.RemoteDisconnected, ConnectionError, http.client.BadStatusLine):
                self.conn.close()
                self.conn, self.reused = self._new(), False
        return self.guard(lambda: self._send(method, headers))

    def _send(self, method: str, headers: Mapping[str, str]) -> http.client.HTTPResponse:
        if self.conn.sock is not None:
            self.conn.sock.settimeout(max(0.001, self.deadline - time.monotonic()))
        self.conn.request(method, self.target, headers=dict(headers))
        return self.conn.getresponse()

    def guard(self, step):
        """Run ``step``, turning what the network raises into a named :class:`RemoteError`."""
        try:
            out = step()
        except RemoteError:
            self._late()
            raise
        except ssl.SSLError as err:
            raise RemoteError(
                f"{_show(self.url)}: TLS failed ({terminal(elide(str(err.reason or err), 200))}); tensorviz "
                f"verifies certificates as pip and huggingface_hub do (set SSL_CERT_FILE for a private CA)"
            ) from None
        except (OSError, http.client.HTTPException) as err:
            self._late()
            raise RemoteError(f"{_show(self.url)}: {type(err).__name__}: {terminal(elide(str(err), 200))}") from None
        self._late()
        return out

    def _late(self) -> None:
        """At the deadline the watchdog cut the connection: whatever was read since is partial
        (a cut status line or header block parses as a short one), so it is a timeout."""
        if self.expired or time.monotonic() >= self.deadline:
            raise RemoteError(
                f"{_show(self.url)}: no complete answer within {self.timeout:g} s (the server is slow or "
                f"trickles bytes); pass remote_limits={{'timeout': SECONDS}} to wait longer"
            ) from None


def _status_message(url: str, resp: http.client.HTTPResponse, conn: _Connection) -> str:
    """An error status in words, with the server's (the Hub's) own explanation quoted."""
    said = resp.getheader("X-Error-Message") or ""
    if not said:
        try:
            raw = conn.guard(lambda: resp.read(1 << 16))
            text = raw.decode("utf-8", "replace")
            said = str(json.loads(text).get("error", "")) if text.lstrip().startswith("{") else text
        except (RemoteError, ValueError, AttributeError):
            said = ""
    hint = {
        401: "the file needs a token: log in with `hf auth login` or set HF_TOKEN",
        403: "your token may not read it (a gated repository: accept its terms on the Hub first)",
        404: "check the repository, revision and file name",
        429: "the server is rate-limiting: wait and try again, or log in for a higher limit",
    }.get(resp.status, "")
    quoted = f": {terminal(elide(' '.join(said.split()), 300))}" if said.strip() else ""
    return f"{_show(url)}: the server answered {resp.status} {terminal(resp.reason or '')}{quoted}" + (
        f" ({hint})" if hint else ""
    )


# -- bodies ------------------------------------------------------------------------------------------
def _read_body(resp: http.client.HTTPResponse, url: str, n: int, meter: Meter) -> bytes:
    """Exactly ``n`` body bytes (fewer only if the server ends the body early: the caller checks)."""
    out = bytearray()
    while len(out) < n:
        chunk = resp.read1(min(_CHUNK, n - len(out)))
        if not chunk:
            break
        meter.received(url, len(chunk))
        out += chunk
    return bytes(out)


def _range_body(resp: http.client.HTTPResponse, url: str, start: int, want: int, meter: Meter) -> Response:
    if resp.status == 304:  # a conditional request: the cached bytes are still the file's
        return _answer(resp, url, b"", None)
    declared = _length(resp, url)
    if resp.status == 206:
        first, last, whole = _content_range(resp, url, start, want)
        total: int | None = whole
        n = last - first + 1
        if declared is not None and declared != n:
            raise RemoteError(
                f"{_show(url)}: the server declares a {declared}-byte body for the {n} bytes of its Content-Range"
            )
    elif resp.status == 200:  # Range ignored: the body is the whole file, read only what was asked
        total = declared
        if start and total is None:
            raise RemoteError(
                f"{_show(url)}: the server ignores Range requests and does not say the file's length; "
                f"tensorviz reads headers only and will not stream the whole file"
            )
        if start:
            raise RemoteError(
                f"{_show(url)}: the server ignores Range requests (it answered 200 to bytes={start}-): "
                f"reading from byte {start} would stream everything before it; download the file instead"
            )
        n = min(want, total) if total is not None else want
    else:
        raise RemoteError(f"{_show(url)}: unexpected answer {resp.status} to a range request")
    body = _read_body(resp, url, meter.left(url, n), meter)
    if len(body) < n and (resp.status == 206 or total is not None):
        raise RemoteError(f"{_show(url)}: the body ended after {len(body)} of the {n} bytes the server declared")
    if resp.status == 206 and resp.read1(1):
        raise RemoteError(f"{_show(url)}: the server sent more than the {n} bytes of its Content-Range")
    return _answer(resp, url, body, total)


def _whole_body(resp: http.client.HTTPResponse, url: str, limit: int, meter: Meter) -> Response:
    declared = _length(resp, url)
    if declared is not None and declared > limit:
        raise TooLargeError(f"{_show(url)}: {declared} bytes is over the {limit}-byte limit for this file")
    body = _read_body(resp, url, meter.left(url, (declared if declared is not None else limit) + 1), meter)
    if declared is None and len(body) > limit:
        raise TooLargeError(f"{_show(url)}: more than {limit} bytes, the limit for this file")
    if declared is not None and len(body) != declared:
        raise RemoteError(f"{_show(url)}: the body has {len(body)} bytes; the server declared {declared}")
    return _answer(resp, url, body, len(body))


def _length(resp: http.client.HTTPResponse, url: str) -> int | None:
    raw = resp.getheader("Content-Length")
    if raw is None:
        return None
    if not raw.strip().isdigit():
        raise RemoteError(f"{_show(url)}: Content-Length {terminal(elide(raw, 40))!r} is not a byte count")
    return int(raw)


def _content_range(resp: http.client.HTTPResponse, url: str, start: int, want: int) -> tuple[int, int, int]:
    raw = (resp.getheader("Content-Range") or "").strip()
    m = _CONTENT_RANGE.match(raw)
    if not m or m.group(3) == "*":
        raise RemoteError(
            f"{_show(url)}: a 206 answer whose Content-Range {terminal(elide(raw, 80))!r} is not bytes A-B/SIZE"
        )
    first, last, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
    end = min(start + want, total) - 1  # the server may clip the range at the file's end, no more
    if first != start or last != end or last < first:
        raise RemoteError(
            f"{_show(url)}: asked for bytes {start}-{start + want - 1}, the server's Content-Range says "
            f"{first}-{last}/{total}; it disagrees with the request"
        )
    return first, last, total


def _answer(resp: http.client.HTTPResponse, url: str, body: bytes, size: int | None) -> Response:
    if size is None and resp.status in (200, 204) and resp.getheader("Content-Length", "").strip().isdigit():
        size = int(resp.getheader("Content-Length", "0"))
    linked = resp.getheader("X-Linked-Size")
    if linked and linked.strip().isdigit() and resp.status != 206:
        size = int(linked)  # the Hub's HEAD on an LFS file: the size of the file, not of a pointer
    etag = resp.getheader("X-Linked-Etag") or resp.getheader("ETag")
    return Response(resp.status, body, size, etag, resp.getheader("X-Repo-Commit"), url)
