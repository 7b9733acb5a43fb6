"""What one file contributes to a layout, and how several files merge into one.

Shared by the file readers (``safetensors``, ``checkpoint``, ``shards``, ``dcp``): the
:class:`Part` record, :func:`merge`, opening only regular files (:func:`open_regular`), strict
JSON parsing and the short, bounded texts error messages quote.

A row is the compact form a reader hands to :class:`~tensorviz.core.layout.Layout` (see
:class:`~tensorviz.layout.Rows`): ``(name, storage key, device, storage nbytes, (dtype,
itemsize), shape, stride, offset, start in bytes)``. 20,000 rows cost far less than 20,000
``TensorView`` records, which the layout derives on first use.
"""

from __future__ import annotations

import errno
import json
import math
import os
import reprlib
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, BinaryIO

from tensorviz.core.errors import FileFormatError
from tensorviz.core.facts import SourceRecord
from tensorviz.core.footprint import span
from tensorviz.core.layout import Layout
from tensorviz.core.records import Logical, Skipped, StorageInfo
from tensorviz.core.rows import Field, Rows

#: Largest JSON header (or index file, or checkpoint pickle) accepted; safetensors' own limit.
MAX_HEADER_BYTES = 100_000_000
TORCH_EXTS = (".pt", ".pth", ".bin", ".ckpt")
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


@dataclass
class Part:
    """What one file contributes: view rows (with notes by name), storages, skips, metadata.

    ``label`` names the file in messages about a name found in two files; ``unlaid`` holds the
    byte counts of tensors the file holds but no view can show (packed sub-byte dtypes);
    ``categories`` a category by name (weights, optimizer...: :data:`tensorviz.core.records.CATEGORIES`);
    ``logical`` what a view of quantized bytes encodes, by name.
    """

    rows: list[tuple] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    storages: list[StorageInfo] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    label: str = "?"
    unlaid: dict[str, int] = field(default_factory=dict)
    categories: dict[str, str] = field(default_factory=dict)
    logical: dict[str, Logical] = field(default_factory=dict)

    def names(self) -> Iterator[str]:
        """Every tensor name the file holds, with or without a view."""
        yield from (row[Field.NAME] for row in self.rows)
        yield from self.unlaid


def row_span(row: tuple) -> tuple[int, int]:
    """The byte span ``[start, stop)`` of a row."""
    return span(row[Field.START], row[Field.SHAPE], row[Field.STRIDE], row[Field.DTYPE][Field.ITEMSIZE])


def row_nbytes(row: tuple) -> int:
    """``numel * itemsize`` of a row."""
    return math.prod(row[Field.SHAPE]) * row[Field.DTYPE][Field.ITEMSIZE]


# -- merging parts into one Layout ---------------------------------------------------------------
def merge(parts: Iterable[Part], fmt: str, source: str, extra: Mapping[str, Any] | None = None) -> Layout:
    """One Layout from several files; a name seen in an earlier file is skipped and reported."""
    merged = _Merged(fmt)
    for part in parts:
        merged.add(part)
    return merged.layout(source, extra)


class _Merged:
    """The parts read so far: rows, storages, skips, problems and metadata, and who owns each name."""

    def __init__(self, fmt: str) -> None:
        self.rows = Rows()
        self.storages: list[StorageInfo] = []
        self.skipped: list[Skipped] = []
        self.problems: list[str] = []
        self.meta: dict[str, Any] = {"format": fmt}
        self.owner: dict[str, str] = {}  # name -> label of the file that holds it

    def add(self, part: Part) -> None:
        self.storages.extend(part.storages)
        self._add_rows(part)
        self.skipped.extend(part.skipped)
        self.problems.extend(part.problems)
        for k, v in part.meta.items():
            if isinstance(v, dict) and isinstance(self.meta.get(k), dict):
                self.meta[k].update(v)
            elif isinstance(v, SourceRecord) and type(self.meta.get(k)) is type(v):
                self.meta[k] = self.meta[k].merged(v)  # as a dict's update: the later part's fields win
            else:
                self.meta[k] = dict(v) if isinstance(v, dict) else v

    def _add_rows(self, part: Part) -> None:
        rows, owner, label = self.rows, self.owner, part.label
        for row in part.rows:
            name = row[Field.NAME]
            if name in owner:
                a, b = row_span(row)
                self.skipped.append(
                    Skipped(
                        f"{name} [{label}]",
                        f"duplicate: {owner[name]} already holds a "
                        f"tensor of this name; this copy (bytes [{a}, {b})) is hidden",
                    )
                )
                self.problems.append(f"duplicated: {name!r} is in {owner[name]} and {label}")
                continue
            owner[name] = label
            if name in part.notes:
                rows.notes[len(rows.rows)] = part.notes[name]
            if name in part.categories:
                rows.categories[len(rows.rows)] = part.categories[name]
            if name in part.logical:
                rows.logical[len(rows.rows)] = part.logical[name]
            rows.rows.append(row)

    def layout(self, source: str, extra: Mapping[str, Any] | None) -> Layout:
        meta = self.meta
        meta.update(extra or {})
        dropped = _dropped(meta.get("__metadata__", {}), self.owner)
        if dropped:
            meta["dropped"] = dropped
        if self.problems:
            meta["problems"] = self.problems
        rows = self.rows
        used = {row[Field.TOKEN] for row in rows.rows}
        rows.labels = {s.key: s.label for s in self.storages if s.label}
        rows.extra = [(s.key, s.device, s.nbytes, s.label) for s in self.storages if s.key not in used]
        return Layout._from_rows(rows, self.skipped, source=source, metadata=meta)


def _dropped(file_meta: Mapping[str, Mapping[str, str]], names: Mapping[str, str]) -> dict[str, str]:
    """safetensors' save_model stores {dropped name: kept name} for each removed shared tensor."""
    out: dict[str, str] = {}
    for md in file_meta.values():
        for k, v in md.items():
            if v in names and k not in names:
                out[k] = v
    return out


# -- strict JSON ---------------------------------------------------------------------------------
class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def parse_json(path: str, raw: bytes | str, what: str, **hooks: Any) -> Any:
    """Parse JSON text, refusing a name given twice in one object (which copy would a loader use?).

    ``hooks`` go to :func:`json.loads` (``parse_float``, ...); a ``ValueError`` one raises is
    reported as invalid JSON with its message.

    Raises:
        FileFormatError: not UTF-8, not valid JSON, nested too deeply, or a repeated name.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        pairs = hooks.pop("object_pairs_hook", _no_duplicates)
        return json.loads(text, object_pairs_hook=pairs, **hooks)
    except _DuplicateKey as dup:
        raise FileFormatError(
            f"{path}: the {what} names {dup.key!r} twice; a JSON object may hold "
            f"each name once (which copy would a loader use?)"
        ) from None
    except UnicodeDecodeError as err:
        raise FileFormatError(
            f"{path}: the {what} is not UTF-8 text (byte {err.start}); the file is corrupt or not in this format"
        ) from None
    except RecursionError:
        raise FileFormatError(f"{path}: the {what} JSON is nested too deeply to parse; a real {what} is flat") from None
    except ValueError as err:  # json.JSONDecodeError, int too large, ...
        raise FileFormatError(f"{path}: the {what} is not valid JSON: {one_line(err)}") from None


# -- opening files -------------------------------------------------------------------------------
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(mode: int) -> str | None:
    """What a non-regular file is, in words ("a FIFO (named pipe)", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def _refuse(path: str, kind: str) -> FileFormatError:
    return FileFormatError(
        f"{path}: is {kind}, not a regular file; tensorviz reads only regular files "
        f"(reading it could block forever or never end)"
    )


def check_regular(path: str) -> os.stat_result:
    """``os.stat(path)`` of a regular file; a FileFormatError naming what ``path`` is otherwise.

    Raises:
        FileNotFoundError: nothing is there (a dangling symbolic link says where it points).
        FileFormatError: a symbolic link loop, a FIFO, a socket, a device or a folder.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise FileFormatError(
                f"{path}: is a symbolic link to {os.readlink(path)!r}, which does not exist"
            ) from None
        raise FileNotFoundError(f"no such file: {path!r}") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FileFormatError(f"{path}: is a symbolic link loop (it leads back to itself), not a file") from None
        raise
    kind = not_regular(st.st_mode)
    if kind:
        raise _refuse(path, kind)
    return st


@contextmanager
def open_regular(path: str) -> Iterator[BinaryIO]:
    """Open ``path`` for reading only if it is a regular file, without ever blocking.

    The type is checked before opening (opening a FIFO for reading waits for a writer; some
    devices act when opened), the file is opened with ``O_NONBLOCK`` and checked again with
    ``fstat`` (it may have been swapped in between). Callers read with explicit sizes.
    """
    check_regular(path)
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # (Windows has none, and no FIFOs to open)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a socket swapped in after the check
            raise _refuse(path, "a socket") from None
        raise
    kind = not_regular(os.fstat(fd).st_mode)
    if kind:
        os.close(fd)
        raise _refuse(path, kind)
    with os.fdopen(fd, "rb") as f:
        yield f


def read_exactly(path: str, f: BinaryIO, n: int, what: str) -> bytes:
    """``n`` bytes from ``f`` (``n`` already checked against the file's size and a limit)."""
    data = f.read(n)
    if len(data) != n:  # the file shrank while we read it
        raise FileFormatError(f"{path}: the {what} should be {n} bytes but the file ended after {len(data)}")
    return data


# -- short texts for messages ----------------------------------------------------------------------
_CHEAP = (float, complex, bool, type(None))
_TORCH_CHEAP = ("dtype", "device", "layout", "memory_format", "qscheme")


class _Bounded(reprlib.Repr):
    """reprlib's repr with bounded work for every value: it never sorts a whole dict or set,
    never builds the full repr of bytes, a big int or an unknown object (a 600 MB bytearray is
    described by its first bytes, an 8M-dimension ``torch.Size`` by its first items)."""

    def repr_bytes(self, x: Any, level: int) -> str:
        return repr(bytes(x[: self.maxstring])) + ("…" if len(x) > self.maxstring else "")

    def repr_bytearray(self, x: Any, level: int) -> str:
        return f"bytearray({self.repr_bytes(x, level)})"

    def repr_int(self, x: int, level: int) -> str:
        return repr(x) if -(10**30) < x < 10**30 else f"<int of {x.bit_length()} bits>"

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{…}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}" for k, v in islice(x.items(), self.maxdict)]
        return "{" + ", ".join(items) + (", …" if len(x) > self.maxdict else "") + "}"

    def repr_set(self, x: Any, level: int) -> str:
        if level <= 0:
            return "{…}"
        items = [self.repr1(v, level - 1) for v in islice(x, self.maxset)]
        return "{" + ", ".join(items) + (", …" if len(x) > self.maxset else "") + "}" if x else "set()"

    repr_frozenset = repr_set

    def repr_instance(self, x: Any, level: int) -> str:
        if isinstance(x, str):
            return self.repr_str(str.__str__(x)[: self.maxstring + 1], level)
        if isinstance(x, tuple):
            return self.repr_tuple(tuple(islice(x, self.maxtuple + 1)), level)
        if isinstance(x, list):
            return self.repr_list(list(islice(x, self.maxlist + 1)), level)
        if isinstance(x, Mapping) and type(x).__module__ == "collections":
            return self.repr_dict(x, level)
        t = type(x)
        if t in _CHEAP or (t.__module__ == "torch" and t.__name__ in _TORCH_CHEAP):
            return reprlib.Repr.repr_instance(self, x, level)
        return f"<{t.__name__}>"


_SHORT = _Bounded()
_SHORT.maxstring = _SHORT.maxother = _SHORT.maxlong = 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 6
_SHORT.maxlevel = 3


def short(x: Any, limit: int = 60) -> str:
    """``repr(x)``, cut to ``limit`` characters; bounded work even for a huge or deep value."""
    try:
        text = _SHORT.repr(x)
    except RecursionError:
        text = f"<{type(x).__name__}>"
    except Exception:  # noqa: BLE001 - a value whose repr fails is still described
        text = f"<{type(x).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(err: BaseException) -> str:
    """An exception's message on one line of at most 300 characters."""
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:299] + "…"
