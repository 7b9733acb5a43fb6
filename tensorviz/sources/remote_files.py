"""One file read by byte ranges wherever it lives, and the places such files are listed.

:class:`RemoteFile` reads ``[start, stop)`` of a file over HTTP (:mod:`.http`) or fsspec and
knows its size after the first read; :func:`header_of` reads and validates a safetensors header
from it with the local rules (``safetensors.parse_header``); :class:`HeaderCache` keeps validated
headers on disk under the revision or ETag that fixes their content; a :class:`Location` is a
folder-like place (a URL prefix, a repository at a commit, an fsspec folder) that opens files by
name and, where it can, lists them. Standard library only, except fsspec for its schemes
(imported when such a URL is given).
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tensorviz.core.errors import FileFormatError, RemoteError
from tensorviz.core.names import elide, terminal
from tensorviz.sources import http
from tensorviz.sources.formats.gguf import GGUFHeader, gguf_header_from, gguf_part
from tensorviz.sources.formats.safetensors import SafetensorsHeader, parse_header, safetensors_part
from tensorviz.sources.parts import MAX_HEADER_BYTES, ZIP_MAGIC, Part

__all__ = ["RemoteFile", "part_of", "RangeIO", "HeaderCache", "Location", "http_location", "fsspec_location"]


# -- one remote file ----------------------------------------------------------------------------
@dataclass
class RemoteFile:
    """A file read by ranges: ``read(start, stop)``; ``size`` is known after the first read.

    ``key`` names its content for the cache (a URL with the commit or ETag that fixes it);
    ``label`` is how layouts and messages show it (the URL, escaped when printed).
    """

    label: str
    reader: Callable[[int, int, str | None], http.Response]
    cache: HeaderCache | None = None
    key: str | None = None
    size: int | None = None
    etag: str | None = None

    def prefix(self, n: int) -> bytes:
        """The file's first ``n`` bytes (fewer if it is shorter), from the cache when it has them."""
        cached = self.cache.get(self.key or self.label) if self.cache else None
        if cached is not None and len(cached[1]) >= 8:
            size, data, etag = cached
            if self.key is not None:  # content fixed by a revision: no request at all
                self.size, self.etag = size, etag
                return data
            resp = self.reader(0, n, etag)  # a conditional request: 304 carries no body
            if resp.status == 304:
                self.size, self.etag = size, etag
                return data
            return self._took(resp)
        return self._took(self.reader(0, n, None))

    def read(self, start: int, stop: int) -> bytes:
        resp = self.reader(start, stop, None)
        if resp.etag and self.etag and resp.etag != self.etag:
            raise RemoteError(
                f"{terminal(self.label)} changed while it was read (ETag {terminal(self.etag)} "
                f"then {terminal(resp.etag)}); read it again"
            )
        return resp.body

    def _took(self, resp: http.Response) -> bytes:
        if resp.size is None:
            raise RemoteError(f"{terminal(self.label)}: the server does not say how long the file is")
        self.size, self.etag = resp.size, resp.etag
        return resp.body

    def remember(self, data: bytes) -> None:
        """Keep the validated header bytes for the next look (never before they are validated)."""
        if self.cache is not None and self.size is not None and (self.key or self.etag):
            self.cache.put(self.key or self.label, self.size, data, self.etag)


def part_of(f: RemoteFile, first: int) -> Part:
    """What the remote file ``f`` contributes to a layout, from its header alone: a safetensors
    or a GGUF file (told by its first bytes, as :mod:`.formats` tells local files), validated by
    the local readers' own rules. ``first`` is how many bytes the first range asks for."""
    data = f.prefix(first)
    if data[:4] == b"GGUF":
        return gguf_part(_gguf_header(f, data))
    kind = _other_format(data)
    if kind:
        raise FileFormatError(
            f"{terminal(f.label)} is {kind}; tensorviz reads remote safetensors and GGUF files and "
            f"safetensors indexes header-only (download this file and analyse it locally)"
        )
    return safetensors_part(_safetensors_header(f, data))


def _safetensors_header(f: RemoteFile, data: bytes) -> SafetensorsHeader:
    """The validated safetensors header of ``f`` whose first bytes are ``data`` (the rest read if needed)."""
    extra: list[bytes] = []

    def more(k: int) -> bytes:
        got = f.read(len(data), len(data) + k)
        extra.append(got)
        return got

    header = parse_header(f.label, f.size or 0, data, more)
    f.remember((data + b"".join(extra))[: header.data_start])
    return header


def _gguf_header(f: RemoteFile, data: bytes) -> GGUFHeader:
    """The validated GGUF header of ``f``, read by ranges through :class:`RangeIO`."""
    io = RangeIO(f, data)
    header = gguf_header_from(f.label, io, f.size or 0)
    if len(io.head) >= header.data_start:
        f.remember(io.head[: header.data_start])
    return header


class RangeIO:
    """A read-only, seekable file over a :class:`RemoteFile` for readers written for local files
    (:class:`~tensorviz.sources.formats.bounded.Reader`): reads come from the last fetched window, a miss
    fetches a window that doubles from 256 KiB to 8 MiB, so a long header costs few requests.
    ``head`` keeps the file's bytes from 0 as long as they were read without a gap (what the
    header cache keeps)."""

    def __init__(self, f: RemoteFile, data: bytes) -> None:
        self.f, self.size = f, f.size or 0
        self.buf, self.base, self.pos, self.head = data, 0, 0, data
        self.window = 1 << 18

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else (self.pos + pos if whence == 1 else self.size + pos)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.pos + n, self.size)
        if not (self.base <= self.pos and end <= self.base + len(self.buf)):
            stop = min(self.size, self.pos + max(end - self.pos, self.window))
            self.window = min(self.window * 2, 8 << 20)
            self.buf, self.base = self.f.read(self.pos, stop), self.pos
            if self.base == len(self.head):
                self.head += self.buf
        out = self.buf[self.pos - self.base : end - self.base]
        self.pos += len(out)
        return out


def _other_format(data: bytes) -> str | None:
    """What a file that is not safetensors is, by its first bytes (named in the message)."""
    if data[:4] in ZIP_MAGIC or data[:1] == b"\x80":
        return "a torch checkpoint (a zip archive or pickle)"
    if data[:6] == b"\x93NUMPY":
        return "a NumPy array"
    return None


# -- the header cache -------------------------------------------------------------------------------
class HeaderCache:
    """Validated header bytes on disk, by the key that fixes their content (URL + revision/ETag).

    Lives in ``$TENSORVIZ_CACHE`` (``off`` disables it), else ``$XDG_CACHE_HOME/tensorviz/headers``
    or ``~/.cache/tensorviz/headers``. Entries are re-validated by the same rules on every read,
    and written atomically. A header is at most ``MAX_HEADER_BYTES``, so an entry is too.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def default(cls) -> HeaderCache | None:
        env = os.environ.get("TENSORVIZ_CACHE")
        if env is not None and env.strip().lower() in ("", "0", "off", "no", "false"):
            return None
        base = env or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tensorviz")
        return cls(os.path.join(base, "headers"))

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest())

    def get(self, key: str) -> tuple[int, bytes, str | None] | None:
        try:
            with open(self._path(key), "rb") as f:
                meta = json.loads(f.readline(4096))
                data = f.read(MAX_HEADER_BYTES + 9)
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("key") != key or type(meta.get("size")) is not int:
            return None
        return meta["size"], data, meta.get("etag") if isinstance(meta.get("etag"), str) else None

    def put(self, key: str, size: int, data: bytes, etag: str | None) -> None:
        try:
            os.makedirs(self.folder, exist_ok=True)
            path = self._path(key)
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "wb") as f:
                f.write(json.dumps({"key": key, "size": size, "etag": etag}).encode() + b"\n" + data)
            os.replace(tmp, path)
        except OSError:  # a read-only home: the cache is an optimisation, never a failure
            pass

    def get_ref(self, key: str) -> str | None:
        hit = self.get(f"ref:{key}")
        return hit[1].decode("ascii", "replace") if hit else None

    def put_ref(self, key: str, sha: str) -> None:
        self.put(f"ref:{key}", 0, sha.encode("ascii"), None)


# -- where files are: a location lists and opens files -------------------------------------------
@dataclass
class Location:
    """A folder-like place files are read from: ``open(name)`` gives a :class:`RemoteFile`;
    ``files`` lists what is there (None where nothing can be listed: plain HTTP)."""

    url: str
    opener: Callable[[str], RemoteFile]
    files: list[str] | None = None
    revision: str | None = None
    meter: http.Meter = field(default_factory=http.Meter)

    def open(self, name: str) -> RemoteFile:
        return self.opener(name)


def http_location(
    base: str,
    meter: http.Meter,
    headers: Mapping[str, str],
    cache: HeaderCache | None,
    revision: str | None = None,
    files: list[str] | None = None,
    key_base: str | None = None,
) -> Location:
    def opener(name: str) -> RemoteFile:
        url = base + quote(name, safe="/")

        def reader(start: int, stop: int, etag: str | None) -> http.Response:
            extra = {**headers, **({"If-None-Match": etag} if etag else {})}
            return http.get_range(url, start, stop, meter, extra)

        key = f"{key_base}/{name}" if key_base else None
        return RemoteFile(url, reader, cache, key)

    return Location(base, opener, files, revision, meter)


def fsspec_location(url: str, meter: http.Meter) -> tuple[Location, str | None]:
    """A location over fsspec, and the file name when ``url`` names a file."""
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise ImportError(
            f"{terminal(url)} needs fsspec: pip install 'tensorviz[remote]' (and the scheme's own package, e.g. s3fs)"
        ) from None
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as err:
        raise ImportError(
            f"{terminal(url)}: fsspec cannot open this scheme: {terminal(elide(str(err), 300))}"
        ) from None
    is_dir = _fs_call(url, meter, lambda: fs.isdir(path))
    folder, name = (path, None) if is_dir else posixpath.split(path)
    files = None
    if is_dir:
        listed = _fs_call(url, meter, lambda: fs.ls(folder, detail=False))
        files = sorted(posixpath.basename(str(p).rstrip("/")) for p in listed)

    def opener(fname: str) -> RemoteFile:
        fpath = posixpath.join(folder, fname)
        label = f"{url.split('://', 1)[0]}://{fpath}"

        def reader(start: int, stop: int, etag: str | None) -> http.Response:
            size = _fs_call(label, meter, lambda: fs.size(fpath))
            body = _fs_call(label, meter, lambda: fs.cat_file(fpath, start=start, end=min(stop, size)))
            meter.received(label, len(body))
            return http.Response(206, bytes(body), int(size), None, None, label)

        return RemoteFile(label, reader)

    return Location(url, opener, files, None, meter), name


def _fs_call(url: str, meter: http.Meter, step: Callable[[], Any]) -> Any:
    meter.request(url)
    try:
        return step()
    except FileNotFoundError:
        raise RemoteError(f"{terminal(url)}: no such file or folder") from None
    except OSError as err:
        raise RemoteError(f"{terminal(url)}: {type(err).__name__}: {terminal(elide(str(err), 300))}") from None
