"""The bytes behind two layouts, hashed: ``tv.diff(a, b, content=True)``.

Each tensor's logical bytes (its elements in row-major order, as ``t.contiguous()`` holds them)
are streamed in bounded chunks (:data:`CHUNK` bytes; never a whole tensor in memory unless it is
smaller) into a BLAKE2b hash. Where they come from:

- a live tensor (module, state dict): read block by block of leading rows (a non-contiguous
  block is copied, one block at a time); a meta or fake tensor has no bytes;
- a safetensors file (a view of a whole file): its byte range, read from the file in chunks
  with ``readinto`` (no torch);
- a torch checkpoint: ``torch.load(weights_only=True, mmap=True)``, then as a live tensor (pages
  are read as hashed, not loaded first);
- a DCP folder, or a Layout with no file behind it: not read (listed in ``unread`` with why).

A tensor tied to one already hashed (same storage, span, dtype and geometry) is not read again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from tensorviz.core.diff import ContentDiff, Duplicate, LayoutDiff
from tensorviz.core.layout import Layout
from tensorviz.core.text import whole_files

__all__ = ["compare_content", "CHUNK", "PROGRESS_FROM"]

#: Bytes read and hashed at a time.
CHUNK = 8 << 20

#: With ``progress=None``, a progress bar is shown when more bytes than this are hashed.
PROGRESS_FROM = 1 << 30

Reader = Callable[[], Iterator[memoryview]]


def compare_content(d: LayoutDiff, a: Any, b: Any, *, progress: bool | None = None) -> LayoutDiff:
    """``d`` with :attr:`LayoutDiff.content` filled from the bytes of ``a`` and ``b`` (the objects
    ``d`` was made from, or their Layouts)."""
    la, lb = d.layout_a, d.layout_b
    assert la is not None and lb is not None  # a diff made by tv.diff holds both layouts
    unread: list[tuple[str, str, str]] = []
    readers_a = _readers(a, la, "a", unread)
    readers_b = _readers(b, lb, "b", unread)
    total = _total(la, readers_a) + _total(lb, readers_b)
    bar = _bar(total, progress)
    try:
        hashes_a = _hashes(la, readers_a, bar)
        hashes_b = _hashes(lb, readers_b, bar)
    finally:
        if bar is not None:
            bar.close()
    identical, different = _compare_matched(d, hashes_a, hashes_b)
    duplicates = _duplicates("a", la, hashes_a) + _duplicates("b", lb, hashes_b)
    content = ContentDiff(tuple(identical), tuple(different), tuple(duplicates), tuple(unread), total)
    return dataclasses.replace(d, content=content)


# -- where each tensor's bytes come from ---------------------------------------------------------
def _readers(obj: Any, layout: Layout, side: str, unread: list) -> dict[str, Reader]:
    """Per name of ``layout``, a function streaming its logical bytes; names that cannot be read
    go to ``unread`` as ``(side, name, reason)``."""
    if layout.facts.format == "dcp":
        why = "a DCP checkpoint's chunks are not read (compare after loading it into a model)"
        unread.extend((side, n, why) for n in layout.names)
        return {}
    if isinstance(obj, (str, os.PathLike)) or isinstance(obj, Layout):
        readers = _file_readers(layout)
    else:
        readers = _live_readers(obj, layout)
    for name in layout.names:
        if name not in readers:
            unread.append((side, name, _why_unread(obj, layout, name)))
    return {n: r for n, r in readers.items() if r is not None}


def _why_unread(obj: Any, layout: Layout, name: str) -> str:
    v = layout[name]
    if v.device == "meta":
        return "on meta: no bytes"
    if isinstance(obj, Layout) and v.device != "file":
        return "a Layout keeps no tensors: pass the object itself"
    return f"its bytes are not readable here ({v.device})"


def _file_readers(layout: Layout) -> dict[str, Reader]:
    whole = whole_files(layout)
    out: dict[str, Reader] = {}
    torch_files: dict[str, list[str]] = {}
    for v in layout.views:
        if v.device != "file":
            continue
        if v.storage in whole and v.is_contiguous:
            out[v.name] = _range_reader(str(v.storage[1]), v.start, v.stop)
        else:
            head, sep, tail = str(v.storage[1]).rpartition(":")
            if sep and tail.startswith("data/"):
                torch_files.setdefault(head, []).append(v.name)
    for path, names in torch_files.items():
        out.update(_checkpoint_readers(path, set(names)))
    return out


def _range_reader(path: str, start: int, stop: int) -> Reader:
    def read() -> Iterator[memoryview]:
        buf = bytearray(min(CHUNK, max(stop - start, 1)))
        view = memoryview(buf)
        with open(path, "rb") as f:
            f.seek(start)
            left = stop - start
            while left > 0:
                n = f.readinto(view[: min(left, len(buf))])
                if not n:
                    raise OSError(f"{path}: ends before byte {stop} (a tensor's data is cut short)")
                left -= n
                yield view[:n]

    return read


def _checkpoint_readers(path: str, names: set[str]) -> dict[str, Reader]:
    import torch

    from tensorviz.sources.live import iter_named_values

    loaded = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
    return {n: _tensor_reader(t) for n, t in iter_named_values(loaded) if n in names and isinstance(t, torch.Tensor)}


def _live_readers(obj: Any, layout: Layout) -> dict[str, Reader]:
    import torch

    from tensorviz.sources.live import iter_named_values

    out: dict[str, Reader] = {}
    for name, t in iter_named_values(obj):
        if name in layout and isinstance(t, torch.Tensor) and _has_bytes(t):
            out[name] = _tensor_reader(t)
    return out


def _has_bytes(t: Any) -> bool:
    from tensorviz.sources.live import why_not_analysable

    return t.device.type != "meta" and why_not_analysable(t) is None and type(t).__name__ != "FakeTensor"


def _tensor_reader(t: Any) -> Reader:
    return lambda: _tensor_chunks(t.detach())


def _tensor_chunks(t: Any) -> Iterator[memoryview]:
    """Row-major bytes of ``t`` in pieces of at most :data:`CHUNK` bytes (one element at least)."""
    size = t.element_size()
    if t.dim() == 0 or t.numel() * size <= CHUNK:
        yield _bytes(t)
        return
    if t.dim() == 1:
        step = max(1, CHUNK // size)
        for i in range(0, t.shape[0], step):
            yield _bytes(t[i : i + step])
        return
    row = t[0].numel() * size
    step = max(1, CHUNK // max(row, 1))
    for i in range(0, t.shape[0], step):
        block = t[i : i + step]
        yield from (_tensor_chunks(block[0]) if step == 1 else (_bytes(block),))


def _bytes(t: Any) -> memoryview:
    import torch

    # A conjugate or negative view holds its values' bytes unconjugated / unnegated: resolved
    # here, a chunk at a time, its logical bytes are what torch.equal compares.
    c = t.reshape(-1).cpu().resolve_conj().resolve_neg().contiguous()
    if not c.numel():
        return memoryview(b"")
    if c.stride(0) != 1:  # one element: contiguous whatever its stride, which view(uint8) refuses
        c = c.as_strided((1,), (1,))
    return memoryview(c.view(torch.uint8).numpy())


# -- hashing and comparing -----------------------------------------------------------------------
def _total(layout: Layout, readers: dict[str, Reader]) -> int:
    return sum(v.nbytes for key, v in _distinct(layout, readers).items())


def _distinct(layout: Layout, readers: dict[str, Reader]) -> dict[tuple, Any]:
    """One view per distinct (storage, span, dtype, geometry) among the readable names."""
    out: dict[tuple, Any] = {}
    for v in layout.views:
        if v.name in readers:
            out.setdefault(_same_bytes_key(v), v)
    return out


def _same_bytes_key(v: Any) -> tuple:
    return (v.storage, v.start, v.stop, v.dtype, v.shape, v.stride)


def _hashes(layout: Layout, readers: dict[str, Reader], bar: Any) -> dict[str, bytes]:
    """Per readable name, the BLAKE2b digest of its logical bytes (tied names hashed once)."""
    done: dict[tuple, bytes] = {}
    out: dict[str, bytes] = {}
    for v in layout.views:
        if v.name not in readers:
            continue
        key = _same_bytes_key(v)
        if key not in done:
            h = hashlib.blake2b(digest_size=16)
            for piece in readers[v.name]():
                h.update(piece)
                if bar is not None:
                    bar.update(len(piece))
            done[key] = h.digest()
        out[v.name] = done[key]
    return out


def _compare_matched(d: LayoutDiff, ha: dict[str, bytes], hb: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Matched names of equal shape and dtype, both read: identical bytes, different bytes."""
    la, lb = d.layout_a, d.layout_b
    assert la is not None and lb is not None
    to_b = {n: n for n in la.names if n in lb}
    to_b.update(dict(d.renamed))
    identical: list[str] = []
    different: list[str] = []
    for name, other in to_b.items():
        if name not in ha or other not in hb:
            continue
        va, vb = la[name], lb[other]
        if (va.shape, va.dtype) != (vb.shape, vb.dtype):
            continue
        (identical if ha[name] == hb[other] else different).append(name)
    return identical, different


def _duplicates(side: str, layout: Layout, hashes: dict[str, bytes]) -> list[Duplicate]:
    """Names holding the same bytes (dtype, shape and digest) as an earlier name without sharing
    its storage bytes: each a redundant copy a tie would save."""
    first: dict[tuple, str] = {}
    out = []
    for v in layout.views:
        digest = hashes.get(v.name)
        if digest is None or not v.nbytes:
            continue
        key = (v.dtype, v.shape, digest)
        of = first.setdefault(key, v.name)
        if of != v.name and layout.relation(of, v.name) not in ("identical", "same-bytes"):
            out.append(Duplicate(side, v.name, of, v.nbytes))
    return out


def _bar(total: int, progress: bool | None) -> Any:
    """A tqdm bar over ``total`` bytes when asked (or, with None, past :data:`PROGRESS_FROM`)."""
    if progress is False or (progress is None and total <= PROGRESS_FROM):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if progress:
            raise
        return None
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="tensorviz diff: hashing")
