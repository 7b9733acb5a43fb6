"""Open checkpoints without loading them: safetensors headers, sharded indexes, torch checkpoints.

``analyze_path`` never reads tensor data and never allocates by a size a file claims.

* **safetensors** (``*.safetensors``): only the 8-byte little-endian header length and the JSON
  header are read, with the standard library (no mmap, no data). The storage is the file itself
  (``device == "file"``, key ``("file", path)``, ``nbytes`` = file size) and every tensor's span
  ``[start, stop)`` is its absolute byte range, ``8 + header_len + data_offsets``. Because a file
  view's byte position is absolute, its ``offset`` has a file-specific meaning: the element index
  of the tensor's first element counted from the start of the *data section* (``data_offsets[0]
  // itemsize``; a note flags a tensor whose data offset is not a multiple of its itemsize). The
  header region (and the bytes of packed sub-byte tensors) are bytes no view reads, so they show
  as unreferenced; the header's span is also in ``layout.metadata["header"]`` so diagrams can
  label it. A header is refused exactly where ``safetensors.safe_open`` refuses it (gaps and
  trailing bytes included; see :mod:`tensorviz.sources.formats.st_rules`).
* **sharded checkpoints** (``*.index.json``, or a model folder): every shard is a storage; the
  ``weight_map`` is checked against the shards' headers and missing, extra, misplaced and
  duplicated names are reported in ``layout.metadata["problems"]`` (and as skipped entries).
* **torch checkpoints** (``.pt``/``.pth``/``.bin``): ``torch.load(path, weights_only=True,
  mmap=True, map_location=<keep storage>)``. We checked both data-free options on torch 2.13:
  ``map_location="meta"`` reads no data but gives every tensor its own meta storage (a slice
  ``w[10:20]`` of a saved ``w`` comes back on a separate storage), so ties and slices of one
  storage are lost; ``mmap=True`` maps the file without touching it (no ``read`` of tensor bytes,
  resident memory unchanged for a 128 MiB checkpoint) and keeps every view on its saved storage
  with its offset. So tensorviz uses ``mmap=True``; it reads only metadata (offset, shape,
  stride, dtype, storage identity) and drops the mapping before returning. Each saved storage
  (zip record ``data/N``) is one storage of the layout, key ``("file", "path:data/N")``. Names
  keep the path inside the checkpoint (``state_dict.fc.weight``, ``optimizer.state.0.exp_avg``);
  non-tensor values go to ``metadata["values"]``. A pickle that ``weights_only`` refuses raises
  :class:`~tensorviz.errors.UnsafeCheckpointError`: tensorviz never runs code from a file.

Every malformed or hostile file raises :class:`~tensorviz.errors.FileFormatError` naming the
file, the tensor and what is wrong (a work limit: :class:`~tensorviz.errors.TooLargeError`).
Only regular files are opened (``parts.open_regular``: a FIFO, socket, device or link loop is
named as such, never read), every read has a size the format bounds, links out of a model
folder are not followed, and no message quotes the bytes of a file that is not in the format.

Which reader opens a file is decided by its first bytes (:mod:`.formats`, the formats table:
also GGUF in :mod:`.gguf`, NumPy ``.npy``/``.npz`` in :mod:`.numpy_files`, ONNX in :mod:`.onnx_files`); the name decides
only when no format's magic matches. This module is the entry point and reads model folders; the readers: ``safetensors`` (headers)
with ``st_rules`` (safetensors' own validation rules), ``checkpoint`` (torch zip checkpoints)
with ``ckpt_walk`` (the bounded walk of what a pickle holds), ``shards`` (which reader a file
needs, sharded indexes), ``dcp`` and ``parts`` (opening files, what each file contributes, and
the merge).

Layout metadata keys (all JSON-friendly): ``format`` ("safetensors", "safetensors-index",
"folder", "torch", "torch-index"), ``header`` ({file path: (0, 8 + header_len)}),
``__metadata__`` ({file path: the file's ``__metadata__``}), ``dropped`` ({dropped name: kept
name}, from ``safetensors.torch.save_model``), ``problems`` (list of sentences), ``index``,
``contents``, ``values``, ``record_offsets`` ({storage identity: byte offset of the record}),
``saved_on`` ({storage identity: device it was saved from}, only for non-CPU storages), ``ignored_files``,
``variant`` and ``variants`` (the weight variant read and the others in the folder, {variant: files}).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from tensorviz.core.errors import FileFormatError
from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, terminal
from tensorviz.core.rows import gc_paused
from tensorviz.sources.formats.dcp import analyze_dcp, is_dcp_folder
from tensorviz.sources.formats.safetensors import (
    SAFETENSORS_DTYPES,
    HeaderEntry,
    SafetensorsHeader,
    read_safetensors_header,
)
from tensorviz.sources.formats.table import sniff
from tensorviz.sources.packed import annotate_packed
from tensorviz.sources.parts import MAX_HEADER_BYTES, TORCH_EXTS, merge, open_regular
from tensorviz.sources.shards import analyze_files, analyze_index, leaves_folder, natural_key, read_part, same_spelling
from tensorviz.sources.variants import pick_variant

__all__ = [
    "analyze_path",
    "read_safetensors_header",
    "SafetensorsHeader",
    "HeaderEntry",
    "MAX_HEADER_BYTES",
    "SAFETENSORS_DTYPES",
]

# Trainer folders also hold pickles that are not weights (training_args.bin, rng_state.pth).
_NOT_WEIGHTS = ("training_args", "rng_state", "scheduler", "optimizer")


def analyze_path(path: str | os.PathLike, variant: str | None = None) -> Layout:
    """Lay out the tensors of a file or model folder from metadata only.

    Args:
        path: a ``.safetensors`` file, a ``*.index.json`` of shards, a model folder, or a torch
            checkpoint (``.pt``/``.pth``/``.bin``).
        variant: for a model folder holding several weight variants (``model.safetensors`` and
            ``model.fp16.safetensors``), the one to read, as ``from_pretrained(variant=...)``;
            the default (no variant in the names) when None (see :mod:`.variants`).

    Returns:
        A :class:`~tensorviz.core.layout.Layout`; ``layout.metadata`` holds what the file says
        besides tensors (see the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        FileFormatError: the file is malformed or hostile (the message names file and tensor).
        UnsafeCheckpointError: a pickle needs code to load; tensorviz only uses weights_only.

    >>> import tensorviz as tv
    >>> layout = tv.analyze("model.safetensors")            # doctest: +SKIP
    >>> layout["lm_head.weight"].start, layout.metadata["header"]   # doctest: +SKIP
    """
    p = os.fspath(path)
    if not os.path.lexists(p):  # a dangling link or a link loop is reported as what it is
        raise FileNotFoundError(f"no such file or folder: {p!r}")
    layout = _read_path(p, variant)
    # Packed quantized weights (GPTQ, AWQ, FP8 block scales): the logical weight on each piece.
    return annotate_packed(layout, p if os.path.isdir(p) else os.path.dirname(p) or ".")


def _read_path(p: str, variant: str | None) -> Layout:
    """:func:`_analyze_path` with the collector paused, and an unreadable file named."""
    # A big header makes hundreds of thousands of small acyclic objects; each collection they
    # would trigger scans every live object (~300k once torch is imported).
    with gc_paused():
        try:
            return _analyze_path(p, variant)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise
        except OSError as err:  # /proc/self/mem, a file on a failing disk: named, not raw
            raise FileFormatError(
                f"{terminal(elide(p, 300))}: reading it failed ({err.strerror or type(err).__name__}); "
                f"tensorviz reads regular files whose bytes can be read"
            ) from None


def _analyze_path(p: str, variant: str | None) -> Layout:
    """:func:`analyze_path` past its checks: which reader the path needs."""
    if os.path.isdir(p) and is_dcp_folder(p):
        return analyze_dcp(p)
    if os.path.basename(p) == ".metadata":  # the metadata file of a DCP folder
        return analyze_dcp(os.path.dirname(p) or ".")
    if os.path.isdir(p):
        return _analyze_folder(p, variant)
    if variant is not None:
        raise ValueError(f"variant= picks weights in a model folder; {p!r} is a file: analyse it without variant=")
    fmt = sniff(p)  # the file's first bytes pick the reader (see :mod:`.formats`)
    if fmt.part is None:
        return analyze_index(p)
    return merge([fmt.part(p)], fmt.name, source=p)


# -- model folders ---------------------------------------------------------------------------------
def _analyze_folder(path: str, variant: str | None = None) -> Layout:
    """A model folder: its safetensors index, else its safetensors files, else torch files (of
    one weight variant: see :mod:`.variants`)."""
    entries = sorted(os.listdir(path), key=natural_key)  # shard 2 before shard 10
    files, chosen = pick_variant(path, [e for e in entries if os.path.isfile(os.path.join(path, e))], variant)
    if any(e.endswith("_optim_states.pt") for e in files):
        from tensorviz.sources.training_folder import is_zero_folder, zero_parts  # needs torch

        if is_zero_folder(files):  # DeepSpeed's ZeRO checkpoint: every rank's optimizer partition
            return merge(zero_parts(path, files), "folder", source=path)
    if os.path.isdir(os.path.join(path, "zero")) and any(e.endswith("_model_states.pt") for e in files):
        from tensorviz.sources.training_folder import is_universal, universal_parts  # needs torch

        if is_universal(path, files):  # DeepSpeed's universal checkpoint
            return merge(universal_parts(path, files), "folder", source=path)
    groups = weight_groups(files)
    weights = [e for _, group in groups for e in group]
    for kind, group in groups:
        if not group:
            continue
        if kind == "index" and len(group) > 1:
            if "model.safetensors.index.json" not in group:
                raise FileFormatError(f"{path}: several indexes ({', '.join(group)}); pass the one to analyse")
            group = ["model.safetensors.index.json"]
        for name in group:
            outside = leaves_folder(path, os.path.join(path, name))
            if outside:
                raise FileFormatError(f"{path}: {outside}")
        used = set(group) | set(_index_shards(os.path.join(path, group[0])) if kind == "index" else ())
        ignored = [e for e in weights if e not in used]
        extra = {"ignored_files": ignored, **chosen} if ignored else chosen
        if kind == "index":
            return analyze_index(os.path.join(path, group[0]), source=path, extra=extra)
        if any(_OPTIMIZER_FILE.match(e) for e in files if e not in group):
            return _training_folder(path, group, files, extra)
        return analyze_files([os.path.join(path, g) for g in group], "folder", source=path, extra=extra)
    other = _other_format_files(path, files)
    if other:
        return analyze_files(other, "folder", source=path)
    shown = ", ".join(entries[:8]) + (f", … ({len(entries)} entries)" if len(entries) > 8 else "")
    raise FileFormatError(
        f"{path}: no weights found: expected *.safetensors, *.safetensors.index.json, "
        f"pytorch_model.bin.index.json, .bin/.pt/.pth files or one .gguf/.onnx/.npz/.npy file; the folder "
        f"holds: {shown or 'nothing'}"
    )


_SPLIT = re.compile(r"^(.*)-\d{5}-of-(\d{5})\.gguf$", re.ASCII)  # llama.cpp's gguf-split shards


def _other_format_files(path: str, files: list[str]) -> list[str]:
    """A folder's one GGUF, ONNX or NumPy file, or all the shards of one split GGUF (each a
    GGUF file of its own); several of anything else is refused, naming them."""
    found = [e for e in files if e.lower().endswith((".gguf", ".onnx", ".npz", ".npy"))]
    splits = {m.group(1, 2) for m in map(_SPLIT.match, found) if m}
    if len(found) > 1 and not (len(splits) == 1 and all(map(_SPLIT.match, found))):
        raise FileFormatError(
            f"{path}: holds {len(found)} weight files of other formats ({', '.join(found[:8])}"
            f"{', …' if len(found) > 8 else ''}); pass the one to analyse"
        )
    for name in found:
        outside = leaves_folder(path, os.path.join(path, name))
        if outside:
            raise FileFormatError(f"{path}: {outside}")
    return [os.path.join(path, e) for e in found]


# accelerate's save_state (optimizer.bin, optimizer_1.bin), transformers' Trainer (optimizer.pt)
_OPTIMIZER_FILE = re.compile(r"^optimizer(_\d+)?\.(bin|pt)$", re.ASCII)


def _training_folder(path: str, group: list[str], files: list[str], extra: Mapping[str, Any]) -> Layout:
    """accelerate's ``save_state`` folder: the weights and each ``optimizer*.bin``, as one layout
    (:mod:`tensorviz.sources.training_folder`: it needs torch, so it is imported here)."""
    from tensorviz.sources.training_folder import training_parts

    weights = [read_part(os.path.join(path, g)) for g in group]
    opt = [e for e in files if _OPTIMIZER_FILE.match(e)]
    ignored = [e for e in extra.get("ignored_files", []) if e not in opt]
    more = {**extra, "ignored_files": ignored} if ignored else {k: v for k, v in extra.items() if k != "ignored_files"}
    return merge([*weights, *training_parts(path, weights, opt)], "folder", source=path, extra=more)


def weight_groups(files: list[str]) -> tuple[tuple[str, list[str]], ...]:
    """The folder's weights files as ("index" | "files", names), in order of preference."""
    pickles = [e for e in files if e.lower().endswith(TORCH_EXTS)]
    return (
        ("index", [e for e in files if e.endswith(".safetensors.index.json")]),
        ("files", [e for e in files if e.endswith(".safetensors")]),
        ("index", [e for e in files if e.endswith((".bin.index.json", ".pt.index.json", ".pth.index.json"))]),
        # Pickles that are not weights are used only when nothing else is there.
        ("files", [e for e in pickles if not e.startswith(_NOT_WEIGHTS)] or pickles),
    )


def _index_shards(index: str) -> list[str]:
    """The shard names an index lists (empty when it cannot be read; analysis then reports why)."""
    try:
        with open_regular(index) as f:
            wm = json.loads(f.read(MAX_HEADER_BYTES)).get("weight_map", {})
        return [same_spelling(v) for v in wm.values() if isinstance(v, str)]
    except (ValueError, AttributeError, RecursionError, OSError):  # FileFormatError is a ValueError
        return []
