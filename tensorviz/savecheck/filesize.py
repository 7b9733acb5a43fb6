"""Why a torch checkpoint is this size: bytes written against bytes any name reads, per category;
slices that drag their whole storage into the file; duplicate copies; fixes that can be pasted,
each with the file size it gives.

``torch.save`` writes every storage a tensor is a view of, whole, once (pytorch#1995: a 64-byte
slice of a 1 GiB tensor writes 1 GiB), plus a pickle and zip headers. Sizes are exact: a live
object's file size, and every fix's, come from torch.save itself run under
``torch.serialization.skip_data()`` into a sparse file of the same base name (torch names the
archive's records after it), so no tensor byte is read, copied or written. Fixes are applied to
stand-ins (``torch.empty_like`` for ``.clone()``: the same storage size, never touched).
"""

from __future__ import annotations

import copy
import html
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from tensorviz.core.categories import LABELS
from tensorviz.core.layout import Layout
from tensorviz.core.names import terminal
from tensorviz.core.units import format_bytes
from tensorviz.sources.formats.zero_optim import ZERO_FILE

__all__ = ["SizeReport", "size_report"]

Path = tuple[Any, ...]  # keys from the saved object down to a tensor


@dataclass(frozen=True)
class CategoryBytes:
    """One category's storages: bytes torch.save writes for them, bytes some name reads."""

    category: str
    written: int
    read: int

    @property
    def unread(self) -> int:
        return self.written - self.read


@dataclass(frozen=True)
class WastedSlice:
    """A storage written whole though its names read only part of it: a slice of a larger tensor,
    or a flat buffer's alignment padding (DeepSpeed's partitions), told apart by where the unread
    bytes lie (``gaps`` runs of them, ``tail_nbytes`` of them after the last byte a name reads)."""

    names: tuple[str, ...]
    storage_nbytes: int
    read_nbytes: int
    gaps: int = 1
    tail_nbytes: int = 0

    def where(self) -> str:
        """Where the unread bytes are, in words."""
        if self.gaps == 1 and self.tail_nbytes == self.wasted_nbytes:
            return "one run at its end"
        if self.gaps == 1:
            return "one run"
        return f"{self.gaps:,} runs" + (f", {format_bytes(self.tail_nbytes)} at its end" if self.tail_nbytes else "")

    @property
    def wasted_nbytes(self) -> int:
        return self.storage_nbytes - self.read_nbytes


@dataclass(frozen=True)
class Duplicate:
    """A copy of a weight kept beside it: ``kind`` is "EMA copy" or "fp32 master"."""

    kind: str
    name: str
    of: str
    nbytes: int


@dataclass(frozen=True)
class SizeFix:
    """A fix to paste (``code`` acts on ``ckpt``, the saved object) and the file it gives."""

    title: str
    code: str
    file_nbytes: int


@dataclass(frozen=True)
class SizeReport:
    """Why a torch checkpoint is this size (see the module docstring)."""

    source: str
    file_nbytes: int
    predicted: bool
    data_nbytes: int
    categories: tuple[CategoryBytes, ...]
    slices: tuple[WastedSlice, ...]
    duplicates: tuple[Duplicate, ...]
    fixes: tuple[SizeFix, ...]
    overhead: str = "pickle and zip"  # what the rest of the file is: "header" for a safetensors file

    @property
    def overhead_nbytes(self) -> int:
        """The pickle, zip headers and record alignment (a safetensors file's header): the file
        less its storages' bytes."""
        return self.file_nbytes - self.data_nbytes

    def lines(self) -> list[str]:
        how = "predicted by a dry run of torch.save" if self.predicted else "on disk"
        out = [
            f"{self.source}: {format_bytes(self.file_nbytes)} ({self.file_nbytes:,} B, {how})",
            f"  storages {format_bytes(self.data_nbytes)} · {self.overhead} {format_bytes(self.overhead_nbytes)}",
            f"  {'category':<22}{'written':>12}{'read by a name':>16}{'not read':>12}",
        ]
        for c in self.categories:
            label = LABELS.get(c.category, "unclassified")
            out.append(
                f"  {label:<22}{format_bytes(c.written):>12}{format_bytes(c.read):>16}{format_bytes(c.unread):>12}"
            )
        for s in self.slices:
            who = ", ".join(s.names[:3]) + (f" (+{len(s.names) - 3})" if len(s.names) > 3 else "")
            out.append(
                f"partly read: {who} read {format_bytes(s.read_nbytes)} of a {format_bytes(s.storage_nbytes)} "
                f"storage: {format_bytes(s.wasted_nbytes)} written that no name reads, in {s.where()}"
            )
        for d in self.duplicates:
            out.append(f"{d.kind}: {d.name} has the shape of {d.of} ({format_bytes(d.nbytes)})")
        if self.fixes and not self.predicted:
            out.append(f"fixes act on ckpt = torch.load({self.source!r}, weights_only=True)")
        for i, f in enumerate(self.fixes, 1):
            out.append(f"fix {i}: {f.title} -> {format_bytes(f.file_nbytes)} ({f.file_nbytes:,} B)")
            out += [f"    {line}" for line in f.code.splitlines()]
        return out

    def __str__(self) -> str:
        return "\n".join(map(terminal, self.lines()))

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(str(self))}</pre>"


# -- the saved object ------------------------------------------------------------------------------
def _leaves(obj: Any, path: Path = ()) -> Iterator[tuple[Path, torch.Tensor]]:
    """``(key path, tensor)`` for every tensor in nested mappings, lists and tuples."""
    stack = [(path, obj)]
    seen: set[int] = set()
    while stack:
        p, value = stack.pop()
        if isinstance(value, torch.Tensor):
            yield p, value
        elif isinstance(value, (Mapping, list, tuple)) and id(value) not in seen:
            seen.add(id(value))
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            stack.extend(reversed([(p + (k,), v) for k, v in items]))


def _code_path(path: Path) -> str:
    return "ckpt" + "".join(f"[{k!r}]" for k in path)


def _replaced(obj: Any, swap: Callable[[Path, torch.Tensor], torch.Tensor | None], path: Path = ()) -> Any:
    """``obj`` with each tensor ``swap`` returns a replacement for replaced, as assigning into it
    would do: a container holding a replacement is a shallow copy (``copy.copy`` keeps a state
    dict's ``_metadata``, which torch.save pickles), any other is ``obj`` itself."""
    if isinstance(obj, torch.Tensor):
        new = swap(path, obj)
        return obj if new is None else new
    if isinstance(obj, (Mapping, list)):
        items = obj.items() if isinstance(obj, Mapping) else enumerate(obj)
        changed = [(k, r) for k, v in items if (r := _replaced(v, swap, path + (k,))) is not v]
        if not changed:
            return obj
        out: Any = copy.copy(obj)
        for k, r in changed:
            out[k] = r
        return out
    if isinstance(obj, tuple):
        parts = [_replaced(v, swap, path + (i,)) for i, v in enumerate(obj)]
        return obj if all(a is b for a, b in zip(parts, obj)) else type(obj)(parts)
    return obj


def saved_nbytes(obj: Any, name: str) -> int:
    """The exact size of ``torch.save(obj, <dir>/name)``: torch itself, under skip_data, into a
    sparse file of that base name (no tensor byte read or written)."""
    with tempfile.TemporaryDirectory(prefix="tv-size-") as tmp:
        path = os.path.join(tmp, os.path.basename(name) or "archive.pt")
        with torch.serialization.skip_data():
            torch.save(obj, path)
        return os.path.getsize(path)


# -- the report ------------------------------------------------------------------------------------
def size_report(obj: Any, *, name: str | None = None) -> SizeReport:
    """Why ``obj`` (a path to a ``.pt``, or what you would pass to ``torch.save``) is this size.

    Args:
        obj: a path to a torch checkpoint, or a mapping (``{"model": ..., "optimizer": ...}``),
            state dict or tensor about to be saved.
        name: the file name the live object would be saved as (torch names the archive's records
            after it, so it changes the size by a few bytes); default ``checkpoint.pt``.

    >>> import torch
    >>> r = size_report({"w": torch.zeros(1000)[:10]}, name="w.pt")
    >>> r.slices[0].wasted_nbytes, r.fixes[0].file_nbytes < r.file_nbytes
    (3960, True)
    """
    from tensorviz.sources import analyze

    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        layout = analyze(path)
        # safe: analyze walked it first; a DeepSpeed ZeRO partition needs DeepSpeed's records, which
        # only tensorviz's own unpickler reads (as data): no object to re-save, so no fixes
        zero = bool(ZERO_FILE.match(os.path.basename(path)))
        saved = None if zero else torch.load(path, weights_only=True, mmap=True)
        file_name, on_disk, source = os.path.basename(path), os.path.getsize(path), path
    else:
        saved, layout = obj, analyze(obj)
        file_name, source = name or "checkpoint.pt", "torch.save(...) to " + (name or "checkpoint.pt")
        on_disk = None
    data = sum(s.nbytes - s.header_nbytes for s in layout.storages if s.device != "meta")
    file_nbytes = saved_nbytes(saved, file_name) if on_disk is None else on_disk
    slices = _slices(layout)
    return SizeReport(
        source=source,
        file_nbytes=file_nbytes,
        predicted=on_disk is None,
        data_nbytes=data,
        categories=_categories(layout),
        slices=slices,
        duplicates=_duplicates(layout),
        fixes=tuple(_fixes(saved, layout, slices, file_name)) if saved is not None else (),
        overhead="header" if any(s.header_nbytes for s in layout.storages) else "pickle and zip",
    )


def _categories(layout: Layout) -> tuple[CategoryBytes, ...]:
    """Per category (of each storage's first view), bytes written and bytes read."""
    written: dict[str, list[int]] = {}
    cats = layout.categories
    for s in layout.storages:
        if s.device == "meta" or not s.names:
            continue
        c = cats[layout.position(s.names[0])]
        w = written.setdefault(c, [0, 0])
        w[0] += s.nbytes - s.header_nbytes  # a file's header is the file's, not a category's
        w[1] += s.covered_nbytes
    order = [*LABELS, ""]
    return tuple(CategoryBytes(c, w, r) for c, (w, r) in sorted(written.items(), key=lambda kv: order.index(kv[0])))


def _slices(layout: Layout) -> tuple[WastedSlice, ...]:
    out = []
    for i, s in enumerate(layout.storages):
        if s.device != "meta" and s.unreferenced_nbytes and s.names:
            runs = layout.unreferenced_runs(i)
            tail = int(runs[-1, 1] - runs[-1, 0]) if len(runs) and int(runs[-1, 1]) == s.nbytes else 0
            out.append(WastedSlice(tuple(s.names), s.nbytes, s.covered_nbytes, len(runs), tail))
    return tuple(sorted(out, key=lambda s: -s.wasted_nbytes))


def _duplicates(layout: Layout) -> tuple[Duplicate, ...]:
    """Copies (EMA, masters) whose names end like a weight's and whose shape is the weight's."""
    weights: dict[str, Any] = {}
    for v, c in zip(layout.views, layout.categories):
        if c == "weights":
            weights.setdefault(v.name.split(".", 1)[-1].removeprefix("module."), v)
    out = []
    for v, c in zip(layout.views, layout.categories):
        if c != "copies":
            continue
        w = weights.get(v.name.split(".", 1)[-1].removeprefix("module."))
        if w is None or w.shape != v.shape:
            continue
        low = w.dtype in ("bfloat16", "float16") and v.dtype == "float32"
        out.append(Duplicate("fp32 master" if low else "EMA copy", v.name, w.name, v.footprint_nbytes))
    return tuple(out)


def _fixes(saved: Any, layout: Layout, slices: tuple[WastedSlice, ...], file_name: str) -> Iterator[SizeFix]:
    """Each fix with its code and the exact size of the file it gives."""
    if slices:
        yield from _slice_fixes(saved, slices, file_name)
    if isinstance(saved, Mapping):
        yield from _keep_one(saved, layout)


def _slice_fixes(saved: Any, slices: tuple[WastedSlice, ...], file_name: str) -> Iterator[SizeFix]:
    wasted = {n for s in slices for n in s.names}
    paths = {".".join(map(str, p)): p for p, _ in _leaves(saved)}
    targets = [paths[n] for n in sorted(wasted, key=list(paths).index) if n in paths]
    if targets:
        chosen = set(targets)
        stand_in = _replaced(saved, lambda p, t: torch.empty_like(t) if p in chosen else None)
        code = "\n".join(f"{_code_path(p)} = {_code_path(p)}.clone()" for p in targets)
        yield SizeFix("clone the slices, so each writes only its own bytes", code, saved_nbytes(stand_in, file_name))
    stand_in = pytree.tree_map(lambda t: torch.empty_like(t) if isinstance(t, torch.Tensor) else t, saved)
    code = (
        "import torch.utils._pytree as pytree\n"
        "ckpt = pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, ckpt)\n"
        "# as DeepSpeed's clone_tensors_for_torch_save does: every tensor cloned, ties included"
    )
    yield SizeFix("clone every tensor (clone_tensors_for_torch_save)", code, saved_nbytes(stand_in, file_name))


def _keep_one(saved: Mapping, layout: Layout) -> Iterator[SizeFix]:
    """For inference: the weights alone (and the EMA weights alone), without optimizer state."""
    tops: dict[str, set[str]] = {}
    for v, c in zip(layout.views, layout.categories):
        tops.setdefault(v.name.split(".", 1)[0], set()).add(c)
    if len(tops) < 2:
        return
    for key, cats in tops.items():
        if key in saved and cats & {"weights", "copies"} and not cats - {"weights", "buffers", "copies"}:
            what, out = ("the EMA weights", "ema.pt") if "copies" in cats else ("the model", "model.pt")
            yield SizeFix(
                f"for inference, save {what} alone (no optimizer state)",
                f'torch.save({_code_path((key,))}, "{out}")',
                saved_nbytes(saved[key], out),
            )
