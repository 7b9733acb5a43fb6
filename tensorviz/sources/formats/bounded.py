"""Bounded reads of binary headers: every length a file claims is checked before it is used.

:class:`Reader` reads a file's header in small chunks, checking each read against the file's
size (a count or length that lies is named, never allocated) and a limit on the bytes read;
skipped bytes (a long string, tensor data) are never read. Little-endian integers for GGUF,
varints for protobuf (ONNX).
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from tensorviz.core.errors import FileFormatError, TooLargeError

__all__ = ["Reader", "ReadSeek"]

_U64 = struct.Struct("<Q")
_CHUNK = 1 << 16


class ReadSeek(Protocol):
    """What :class:`Reader` reads from: a local file, or a remote one read by ranges
    (:class:`~tensorviz.sources.remote_files.RangeIO`)."""

    def seek(self, pos: int, whence: int = 0, /) -> int: ...

    def read(self, n: int = -1, /) -> bytes: ...


class Reader:
    """Bounded little-endian reads from a file: every read is checked against the file's size
    (a length that lies is named, never allocated) and ``limit`` (the most header bytes read;
    past it a :class:`~tensorviz.core.errors.TooLargeError`). Bytes are read in chunks of 64 KiB
    and skipped bytes are never read (a seek)."""

    def __init__(self, path: str, f: ReadSeek, size: int, limit: int, what: str = "header") -> None:
        self.path, self.f, self.size, self.limit, self.what = path, f, size, limit, what
        self.buf, self.base, self.i = b"", 0, 0  # buf holds the file's bytes [base, base + len(buf))
        self.counted = 0  # what the caller counts against a limit of its own (GGUF: array strings)

    @property
    def at(self) -> int:
        return self.base + self.i

    def need(self, n: int, what: str) -> None:
        if self.i + n <= len(self.buf):
            return
        at = self.at
        if n > self.size - at:
            raise FileFormatError(
                f"{self.path}: {what} at byte {at} needs {n} bytes, but the file ends at byte {self.size} "
                f"({self.size - at} left); the header is corrupt or the file truncated"
            )
        if at + n > self.limit:
            raise TooLargeError(
                f"{self.path}: the {self.what} runs past {self.limit >> 20} MiB ({what} at byte {at}); "
                f"tensorviz reads up to that much of it"
            )
        rest = self.buf[self.i :]
        self.f.seek(at + len(rest))
        more = self.f.read(max(n - len(rest), _CHUNK))
        self.buf, self.base, self.i = rest + more, at, 0
        if len(self.buf) < n:  # the file shrank while we read it
            raise FileFormatError(f"{self.path}: the file ended early while reading {what} at byte {at}")

    def unpack(self, fmt: str, n: int, what: str) -> Any:
        self.need(n, what)
        value = struct.unpack_from(fmt, self.buf, self.i)[0]
        self.i += n
        return value

    def u32(self, what: str) -> int:
        return self.unpack("<I", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("<Q", 8, what)

    def skip(self, n: int, what: str) -> None:
        if self.i + n <= len(self.buf):
            self.i += n
            return
        at = self.at
        if n > self.size - at:
            self.need(n, what)  # raises, naming the lie
        if at + n > self.limit:
            self.need(n, what)  # raises TooLargeError
        self.buf, self.base, self.i = b"", at + n, 0

    def string(self, what: str, keep: int) -> tuple[int, str | None]:
        """(length, text) of a GGUF string; the text is None when longer than ``keep`` (skipped)."""
        n = self.u64(f"the length of {what}")
        if n > keep:
            self.skip(n, f"{what} ({n} bytes)")
            return n, None
        self.need(n, f"{what} ({n} bytes)")
        raw = self.buf[self.i : self.i + n]
        self.i += n
        try:
            return n, raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise FileFormatError(
                f"{self.path}: {what} is not UTF-8 text (byte {err.start} of it); GGUF strings are UTF-8"
            ) from None

    def skip_strings(self, count: int, what: str) -> None:
        """Skip ``count`` strings of a u64 length and their bytes (an array's items), unread."""
        unpack, k = _U64.unpack_from, 0
        while k < count:
            buf, i, end = self.buf, self.i, len(self.buf)
            while k < count and i + 8 <= end:
                n = unpack(buf, i)[0]
                if i + 8 + n > end:
                    break
                i += 8 + n
                k += 1
            self.i = i
            if k < count:  # the next string crosses the buffer's end
                self.skip(self.u64(f"the length of string {k} of {what}"), f"string {k} of {what}")
                k += 1
