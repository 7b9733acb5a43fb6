"""Several files as one layout: which reader a file needs, and sharded indexes.

An index (``*.safetensors.index.json``, ``pytorch_model.bin.index.json``) maps tensor names to
shard files. Every shard is a storage; the ``weight_map`` is checked against what the shards
really hold, and missing, extra, misplaced and duplicated names are reported.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tensorviz.core import limits
from tensorviz.core.errors import FileFormatError
from tensorviz.core.layout import Layout
from tensorviz.core.records import Skipped
from tensorviz.core.rows import Field
from tensorviz.sources.formats import table as formats
from tensorviz.sources.parts import (
    MAX_HEADER_BYTES,
    Part,
    check_regular,
    merge,
    open_regular,
    parse_json,
    read_exactly,
    row_nbytes,
    row_span,
    short,
)


def sniff(path: str) -> str:
    """The name of the file's format ("safetensors", "torch", "gguf", "index", ...), from its
    first bytes (see :mod:`.formats.table`)."""
    return formats.sniff(path).name


def read_part(path: str) -> Part:
    """What one weights file contributes (any format of :mod:`.formats.table` but an index)."""
    fmt = formats.sniff(path)
    if fmt.part is None:
        raise FileFormatError(f"{path}: is an index of other files, not a weights file; analyse it on its own")
    return fmt.part(path)


def analyze_files(paths: list[str], fmt: str, source: str, extra: Mapping[str, Any] | None = None) -> Layout:
    """One layout of several weights files (a name in two files is shown once, and reported)."""
    return merge((read_part(p) for p in paths), fmt, source, extra)


# -- sharded indexes -------------------------------------------------------------------------------
def analyze_index(path: str, source: str | None = None, extra: Mapping[str, Any] | None = None) -> Layout:
    """The shards an index names, as one layout, with the weight_map checked against them."""
    obj, wm = _read_index(path)
    folder = os.path.dirname(path)
    wm, names_in = shard_names(path, wm)
    paths = [_shard_path(path, folder, s, names) for s, names in names_in.items()]
    fmt = "torch-index" if paths and sniff(paths[0]) == "torch" else "safetensors-index"
    return index_layout(path, obj, wm, [read_part(p) for p in paths], fmt, source or path, extra)


def natural_key(name: str) -> tuple:
    """Sort key that orders the numbers in a file name by value: shard 2 before shard 10.

    >>> sorted(["model-10-of-12.safetensors", "model-2-of-12.safetensors"], key=natural_key)
    ['model-2-of-12.safetensors', 'model-10-of-12.safetensors']
    """
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def shard_names(index: str, wm: Mapping[str, str]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The weight_map with one spelling per shard, and the names each shard holds (in order),
    shards in file order (:func:`natural_key`: ``model-00001-of-00004`` first, whatever name
    the weight_map mentions first), so storage #0 is the first file.

    Raises:
        FileFormatError: a shard named by an absolute path or one that leaves the index's folder.
    """
    wm = {name: same_spelling(shard) for name, shard in wm.items()}  # "s1" and "./s1" are one file
    names_in: dict[str, list[str]] = {}
    for name, shard in wm.items():
        names_in.setdefault(shard, []).append(name)
    names_in = dict(sorted(names_in.items(), key=lambda item: natural_key(item[0])))
    for shard, names in names_in.items():
        if os.path.isabs(shard) or shard.startswith("/") or ".." in shard.replace("\\", "/").split("/"):
            raise FileFormatError(
                f"{index}: weight_map puts {names[0]!r} in {shard!r}, a path outside the "
                f"index's folder; shards must sit next to the index"
            )
    return wm, names_in


def index_layout(
    index: str,
    obj: Mapping[str, Any],
    wm: Mapping[str, str],
    parts: list[Part],
    fmt: str,
    source: str,
    extra: Mapping[str, Any] | None = None,
) -> Layout:
    """One layout of the shards' parts (in file order, as :func:`shard_names` lists them), with
    the weight_map and ``total_size`` checked against what the shards hold."""
    shards = sorted(dict.fromkeys(wm.values()), key=natural_key)
    problems, skipped, duplicated = _check_weight_map(wm, shards, parts)
    info = obj.get("metadata")
    total = info.get("total_size") if isinstance(info, dict) else None
    problems.extend(_total_size_problems(total, wm, shards, parts))
    if duplicated:
        parts = _prefer_mapped(parts, wm, shards)
    parts.append(Part(skipped=skipped, problems=problems))
    meta = {"index": {"path": index, "shards": shards, "total_size": total}, **(extra or {})}
    return merge(parts, fmt, source=source, extra=meta)


def _read_index(path: str) -> tuple[dict, dict[str, str]]:
    """The index object and its weight_map, checked to map names to shard file names."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_HEADER_BYTES:
            raise FileFormatError(f"{path}: {size} bytes is over the {MAX_HEADER_BYTES}-byte limit for an index")
        return index_object(path, read_exactly(path, f, size, "index"))


def index_object(path: str, raw: bytes) -> tuple[dict, dict[str, str]]:
    """The index object in ``raw`` and its weight_map, checked to map names to shard file names
    (within the ``index_names`` budget: counted before parsing, ~300 B a name parsed)."""
    cap = limits.current().index_names
    if raw.count(b":") > cap + 64:  # each name takes a colon: refused before parsing
        raise limits.exceeded(path, "index_names", f"its {raw.count(b':'):,} colons before parsing")
    obj = parse_json(path, raw, "index")
    del raw
    wm = obj.get("weight_map") if isinstance(obj, dict) else None
    if isinstance(wm, dict) and len(wm) > cap:
        raise limits.exceeded(path, "index_names", f"its weight_map names {len(wm):,} tensors", needed=len(wm))
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise FileFormatError(
            f'{path}: an index must be a JSON object with a "weight_map" of '
            f"tensor name -> shard file name; got {short(obj)}"
        )
    return obj, wm


def same_spelling(shard: str) -> str:
    """One spelling of a shard's file name: ``./s1``, ``s1`` and ``a//s1`` name one file."""
    if "/" not in shard and "\\" not in shard:
        return shard
    return os.path.normpath(shard.replace("\\", "/")).replace(os.sep, "/")


def _shard_path(index: str, folder: str, shard: str, names: list[str]) -> str:
    p = os.path.join(folder, shard)
    where = f"{index}: weight_map puts {len(names)} tensors (e.g. {names[0]!r}) in shard {shard!r}"
    if not os.path.lexists(p):
        raise FileFormatError(f"{where}, but {p} does not exist; download the missing shard")
    try:
        check_regular(p)
    except (FileFormatError, FileNotFoundError) as err:
        raise FileFormatError(f"{where}, but {err}") from None
    outside = leaves_folder(folder, p)
    if outside:
        raise FileFormatError(f"{where}, but {outside}")
    return p


def leaves_folder(folder: str, path: str) -> str | None:
    """Why ``path`` (in ``folder``) is not contained in it, in words; None when it is.

    A symbolic link may lead anywhere inside the folder; in a Hugging Face cache snapshot
    (``.../snapshots/REV``) also into the repository's own ``blobs/``, where the hub keeps the
    files that snapshots link to. Anything else is not followed: an index from the internet
    must not make tensorviz read (and describe) files elsewhere on this machine.
    """
    root = os.path.realpath(folder or ".")
    real = os.path.realpath(path)
    roots = [root]
    if os.path.basename(os.path.dirname(root)) == "snapshots":
        roots.append(os.path.join(os.path.dirname(os.path.dirname(root)), "blobs"))
    if any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        return None
    return (
        f"{path} is a symbolic link that leads out of its folder (to {real!r}); tensorviz does not "
        f"follow links out of a model folder (copy the file in if you trust it)"
    )


def _check_weight_map(
    wm: Mapping[str, str], shards: list[str], parts: list[Part]
) -> tuple[list[str], list[Skipped], bool]:
    """Compare the weight_map with what each shard's header really holds.

    Returns the problems, a Skipped entry per missing name, and whether any name is in two shards.
    """
    where: dict[str, str] = {}
    also: dict[str, list[str]] = {}  # names found in more than one shard (rare)
    for shard, part in zip(shards, parts):
        for name in part.names():
            first = where.setdefault(name, shard)
            if first != shard:
                also.setdefault(name, []).append(shard)
    problems: list[str] = []
    skipped: list[Skipped] = []
    for name, shard in wm.items():
        found = where.get(name)
        if found is None:
            skipped.append(Skipped(name, f"weight_map puts it in {shard}, but no shard's header has it"))
            problems.append(f"missing: weight_map lists {name!r} in {shard}, but that shard has no such tensor")
        elif found != shard and shard not in also.get(name, ()):
            problems.append(f"misplaced: weight_map puts {name!r} in {shard}, but it is in {found}")
    if len(where) != len(wm) or skipped:
        for name, found in where.items():
            if name not in wm:
                problems.append(
                    f"extra: {name!r} is in {found} but not in the weight_map; "
                    f"loaders that follow the index never load it"
                )
    return problems, skipped, bool(also)


def _total_size_problems(total: Any, wm: Mapping[str, str], shards: list[str], parts: list[Part]) -> list[str]:
    """A problem when the index's ``total_size`` is not the bytes of the tensors it maps."""
    if type(total) is not int:
        return []
    mapped = 0
    for shard, part in zip(shards, parts):
        mapped += sum(row_nbytes(r) for r in part.rows if wm.get(r[Field.NAME]) == shard)
        mapped += sum(n for name, n in part.unlaid.items() if wm.get(name) == shard)
    if total == mapped:
        return []
    return [f"total_size: the index says {total} bytes, but the tensors it maps hold {mapped} bytes"]


def _prefer_mapped(parts: list[Part], wm: Mapping[str, str], shards: list[str]) -> list[Part]:
    """Keep one copy of each name: the one in the shard the weight_map names, else the first.

    ``parts[i]`` is what ``shards[i]`` holds.
    """
    chosen: dict[str, int] = {}
    for i, (shard, part) in enumerate(zip(shards, parts)):
        chosen.update((r[Field.NAME], i) for r in part.rows if wm.get(r[Field.NAME]) == shard)
    for i, part in enumerate(parts):
        for r in part.rows:
            chosen.setdefault(r[Field.NAME], i)
    return [_drop_copies(part, i, chosen, shards) for i, part in enumerate(parts)]


def _drop_copies(part: Part, i: int, chosen: Mapping[str, int], shards: list[str]) -> Part:
    """``part`` (of ``shards[i]``) without the names another shard was chosen for, each reported."""
    dup = [r for r in part.rows if chosen[r[Field.NAME]] != i]
    if not dup:
        return part
    skipped = [
        Skipped(
            f"{r[Field.NAME]} [{shards[i]}]",
            f"duplicate: also in {shards[chosen[r[Field.NAME]]]}, which the "
            f"weight_map names; this copy (bytes [{row_span(r)[0]}, {row_span(r)[1]})) is "
            f"never loaded",
        )
        for r in dup
    ]
    problems = [f"duplicated: {r[Field.NAME]!r} is in {shards[chosen[r[Field.NAME]]]} and {shards[i]}" for r in dup]
    keep = [r for r in part.rows if chosen[r[Field.NAME]] == i]
    return replace(part, rows=keep, skipped=part.skipped + skipped, problems=part.problems + problems)
