"""The text of a Layout: what ``print(layout)`` and ``layout.to_text()`` write, for terminals,
logs and golden tests.

Deterministic: no storage addresses, only indices, sizes, names and byte offsets.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tensorviz.core.categories import category_words, is_training, training_lines
from tensorviz.core.facts import RemoteFacts, TrainingFacts
from tensorviz.core.fsdp import fsdp_lines
from tensorviz.core.limits import current as current_limits
from tensorviz.core.names import shown
from tensorviz.core.pieces import packed_lines
from tensorviz.core.tree import RELATION_WORDS, TreeLayout, format_count, tree_lines
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.records import Group, GroupBy, TensorView


def view_line(v: TensorView) -> str:
    shape = "×".join(map(str, v.shape)) or "scalar"
    flags = []
    if v.is_empty:
        flags.append("empty")
    elif not v.is_contiguous:
        flags.append("non-contiguous")
    if v.is_expanded:
        flags.append("expanded")
    if not v.exact:
        flags.append("footprint≈span")
    if v.note:
        flags.append(v.note)
    if v.piece is not None:
        flags.append(f"{v.piece.part} of {v.piece.of}")
    tail = f"  ({', '.join(flags)})" if flags else ""
    if v.logical is not None:  # quantized bytes: what they encode, then how they are viewed
        lg = v.logical
        blocks = f", {lg.block}-element blocks of {lg.block_nbytes} B" if lg.block > 1 else ""
        shape = f"{shape}] holding {lg.dtype}[{'×'.join(map(str, lg.shape)) or 'scalar'}{blocks}"
    return f"{v.name}  {v.dtype}[{shape}] stride={v.stride} offset={v.offset}  bytes [{v.start}, {v.stop}){tail}"


def whole_files(layout: TreeLayout) -> frozenset:
    """Keys of the storages that are a whole safetensors file (every tensor of the file is on
    it, side by side), as opposed to a storage torch allocated (a ``.pt`` file's records)."""
    return frozenset(s.key for s in layout.storages if s.whole_file)


def shown_shared(layout: TreeLayout, by: GroupBy = "storage") -> tuple[tuple[Group, ...], str]:
    """The shared groups the displays count, and how they were counted (words for a header).

    ``by="storage"`` counts storages with two or more views, but in a safetensors file every
    tensor is on the one file storage: that is packing, not sharing. So within a whole file
    the tensors that share bytes (overlap groups) count instead, and the words say so.
    ``layout.shared()`` itself is unchanged (storage groups are still groups by storage).

    >>> import torch, tensorviz as tv
    >>> groups, how = shown_shared(tv.analyze({"w": (w := torch.zeros(4)), "v": w[2:]}))
    >>> [g.names for g in groups], how
    ([('w', 'v')], 'by storage')
    """
    files = whole_files(layout) if by == "storage" else frozenset()
    if not files:
        return layout.shared(by), f"by {by}"
    if len(files) == len(layout.storages):
        return tuple(layout.shared("overlap")), "by shared bytes within a file"
    position = {n: i for i, n in enumerate(layout.names)}
    groups = [g for g in layout.shared("storage") if g.storage not in files]
    groups += [g for g in layout.shared("overlap") if g.storage in files]
    groups.sort(key=lambda g: position[g.names[0]])
    return tuple(groups), "by storage; by shared bytes within a file"


def storage_noun(layout: TreeLayout) -> str:
    """``"file"`` when every storage is a whole safetensors file, else ``"storage"``."""
    n = len(layout.storages)
    return "file" if n and len(whole_files(layout)) == n else "storage"


def memory_words(parts: Sequence[tuple[int, int]]) -> str:
    """Words for a memory made of several storage objects (``((byte offset, nbytes), ...)``).

    >>> memory_words(((0, 40), (16, 24)))
    ', one memory of 2 storage objects at bytes [0, 40) [16, 40)'
    """
    if not parts:
        return ""
    where = " ".join(f"[{a}, {a + n})" for a, n in parts)
    return f", one memory of {len(parts)} storage objects at bytes {where}"


def layout_text(layout: TreeLayout, by: GroupBy = "storage", max_views: int = 12, full: bool = False) -> str:
    """Storages with their views and coverage, then the shared groups, then what was skipped."""
    storages = layout.storages
    lines = header_lines(layout)
    if storages:
        lines.append("(= a view that reads every byte of its storage)")
    objects = layout.facts.storage_objects
    for s in storages:
        cov = f"{format_bytes(s.covered_nbytes)} read"
        if s.header_nbytes:
            cov += f", {format_bytes(s.header_nbytes)} header"
        if s.unreferenced_nbytes:
            cov += f", {format_bytes(s.unreferenced_nbytes)} unreferenced"
        name = s.label or s.device
        exact = f" ({s.nbytes} B)" if s.nbytes >= 1024 else ""
        bound = "" if s.exact else " (upper bound: a footprint over the run budget)"
        views = layout.storage_views(s.key)
        freed = ", freed: its views point past its end" if not s.nbytes and any(not v.is_empty for v in views) else ""
        lines.append(
            f"storage #{s.index} {name} {format_bytes(s.nbytes)}{exact}{memory_words(objects.get(s.key) or ())}{freed}: "
            f"{len(s.names)} view{'s' * (len(s.names) != 1)}, {cov}{bound}"
        )
        for v in views[:max_views]:
            mark = "=" if v.name in s.complete_names else "-"
            lines.append(f"  {mark} {view_line(v)}")
        if len(views) > max_views:
            lines.append(f"  … {len(views) - max_views} more")
    shared, how = shown_shared(layout, by)
    lines.append(f"shared groups ({how}): {len(shared) or 'none'}")
    for g in shared:
        flag = "" if g.exact else "  (may be too large: a footprint over the run budget)"
        lines.append(f"  {{{', '.join(g.names)}}} bytes [{g.start}, {g.stop}){flag}")
    lines.extend(packed_lines(layout))
    if layout.skipped:
        lines.append(f"skipped: {len(layout.skipped)}")
        for sk in layout.skipped:
            lines.append(f"  {sk.name}: {sk.reason}")
    lines.extend(metadata_lines(layout.metadata))
    # a name is data: it can neither end a line nor restyle one, nor fill the screen unless asked
    return "\n".join(shown(line, full) for line in lines)


def header_lines(layout: TreeLayout, tree: bool = True) -> list[str]:
    """How many tensors on how many storages, and the three byte totals (and, with ``tree``,
    a training layout's bytes by category, from its module tree)."""
    n, ns = len(layout), len(layout.storages)
    lines = [
        f"{n} tensor{'s' * (n != 1)} on {ns} {storage_noun(layout)}{'s' * (ns != 1)}"
        + (f" ({layout.source})" if layout.source else ""),
        f"unique bytes {format_bytes(layout.unique_nbytes)} · sum of views "
        f"{format_bytes(layout.naive_nbytes)} · storages {format_bytes(layout.storage_nbytes)}",
    ]
    if tree and is_training(layout):
        t = layout.tree()
        lines.append(f"by category (counted once): {category_words(t.root.categories, t.optimizer)}")
    return lines


def metadata_lines(metadata: Mapping[str, Any], limit: int = 10) -> list[str]:
    """What a source says besides tensors: file headers, ``__metadata__``, dropped names, problems.

    >>> metadata_lines({"dropped": {"lm_head.weight": "wte.weight"}})
    ['metadata:', '  dropped: lm_head.weight -> kept wte.weight']
    """
    dropped = metadata.get("dropped") or {}
    values = _values_not_in_contents(metadata)
    lines: list[str] = []
    for key, value in metadata.items():
        if key in _NOT_IN_TEXT or (key == "values" and not values):
            continue
        if key == "dropped":
            items = [f"dropped: {a} -> kept {b}" for a, b in value.items()]
        elif key == "problems":
            items = [f"problem: {p}" for p in value]
        elif key == "variants" and isinstance(value, dict):
            items = [
                f"also variant {v}: {', '.join(map(str, files))} (variant={v!r} reads it)" for v, files in value.items()
            ]
        elif key == "header":
            items = [f"header: bytes [{a}, {b}) of {os.path.basename(f)}" for f, (a, b) in value.items() if b > a]
        elif key == "__metadata__":
            items = [
                f"__metadata__ of {os.path.basename(f)}: " + _brief({k: v for k, v in md.items() if k not in dropped})
                for f, md in value.items()
                if set(md) - set(dropped)
            ]
        elif key == "fsdp":
            items = fsdp_lines(value)
        elif key == "training":
            items = training_lines(TrainingFacts.of(value)) if isinstance(value, Mapping) else []
        elif key == "remote" and isinstance(value, Mapping):
            items = [_remote_line(RemoteFacts.of(value))]
        elif key == "values":
            more = metadata.get("values_omitted")
            items = [f"values: {_brief(values)}" + (f" (+{more} more)" if more else "")]
        else:
            items = [f"{key}: {_brief(value)}"]
        lines.extend(f"  {item}" for item in items[:limit])
        if len(items) > limit:
            lines.append(f"  … {len(items) - limit} more {key}")
    return ["metadata:", *lines] if lines else []


def _remote_line(facts: RemoteFacts) -> str:
    """Where a remote source was read and what reading its headers cost.

    >>> _remote_line(RemoteFacts("hf://org/m", "0123456789abcdef" * 2 + "01234567", requests=3, bytes=4096))
    'read from hf://org/m at revision 0123456789ab: 3 requests, 4,096 B received'
    """
    at = f" at revision {str(facts.revision)[:12]}" if facts.revision else ""
    n = facts.requests
    return f"read from {facts.url}{at}: {n} request{'s' if n != 1 else ''}, {facts.bytes:,} B received"


_NOT_IN_TEXT = ("record_offsets", "values_omitted", "modules", "storage_objects")  # the storage labels
# name the records; the omitted count is written on the values line; the module facts feed the
# tree; storage objects are written on their storage's line


def _values_not_in_contents(metadata: Mapping[str, Any]) -> dict:
    """A checkpoint's non-tensor values less those its ``contents`` line already shows (a
    top-level value such as ``step=100`` is in both), so each is written once.

    >>> _values_not_in_contents({"contents": {"model": "2 tensors", "step": "100"},
    ...                          "values": {"step": "100", "opt.lr": "0.1"}})
    {'opt.lr': '0.1'}
    """
    values = metadata.get("values")
    if not isinstance(values, dict):
        return {}
    contents = metadata.get("contents")
    contents = contents if isinstance(contents, dict) else {}
    return {k: v for k, v in values.items() if not (k in contents and contents[k] == v)}


def _brief(value: object, width: int = 160) -> str:
    if isinstance(value, dict):
        text = ", ".join(f"{k}={v}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        text = ", ".join(map(str, value))
    else:
        text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


#: Most lines of the summary ``print(layout)`` writes for a layout too large to list in full.
SCREEN_LINES = 60


def fits_screen(layout: TreeLayout, by: GroupBy = "storage", max_views: int = 12) -> str | None:
    """The full listing when it has at most :data:`SCREEN_LINES` lines, else None (decided from
    counts first, so a large layout's listing is never built just to be thrown away)."""
    if len(layout) + len(layout.skipped) > 2 * SCREEN_LINES:
        return None
    text = layout_text(layout, by=by, max_views=max_views)
    return text if text.count("\n") < SCREEN_LINES else None


#: Where the whole listing is, in Python (``print(layout)``'s last line); the CLI names its flags.
FULL_HINT = "full listing: layout.to_text(full=True) · module tree: layout.tree()"


def compact_text(layout: TreeLayout, by: GroupBy = "storage", hint: str = FULL_HINT) -> str:
    """A summary that fits a screen for any model: totals, ties and shared groups, the largest
    modules (bytes counted once), skipped values and ``hint``, a pointer to the full listing.
    Past ``tv.limits().tree_names`` names the module tree is left out, and a line says so."""
    limit = current_limits().tree_names
    if len(layout) + len(layout.skipped) > limit:
        return _treeless_text(layout, by, limit, hint)
    tree = layout.tree()
    root = tree.root
    lines = header_lines(layout)
    kinds = f"{root.nparams} parameters, {root.nbuffers} buffers" if tree.has_modules else f"{root.ntensors} tensors"
    lines.append(
        f"{kinds} · {format_count(root.numel)} elements (counted once) · "
        f"{', '.join(root.dtypes) or 'no dtype'} · {', '.join(root.devices) or 'no device'}"
    )
    lines += _borrower_lines(tree, 5)
    shared, how = shown_shared(layout, by)
    groups = [f"{{{_names_brief(g.names)}}} bytes [{g.start}, {g.stop})" for g in shared]
    lines += _capped(f"shared groups ({how})", groups, 4)
    tail = _capped("skipped", [f"{sk.name}: {sk.reason}" for sk in layout.skipped], 3)
    tail += _capped("metadata", [m.strip() for m in metadata_lines(layout.metadata)[1:]], 4)
    tail.append(hint)
    budget = SCREEN_LINES - len(lines) - len(tail) - 1
    lines.append("largest modules (bytes counted once; % of unique bytes):")
    lines += ["  " + line for line in _fitting_tree(tree, tree_lines, budget)]
    return "\n".join(map(shown, lines + tail))


def _treeless_text(layout: TreeLayout, by: GroupBy, limit: int, hint: str) -> str:
    """:func:`compact_text` without the module tree (over the ``tree_names`` budget)."""
    lines = header_lines(layout, tree=False)
    shared, how = shown_shared(layout, by)
    groups = [f"{{{_names_brief(g.names)}}} bytes [{g.start}, {g.stop})" for g in shared]
    lines += _capped(f"shared groups ({how})", groups, 4)
    lines += _capped("skipped", [f"{sk.name}: {sk.reason}" for sk in layout.skipped], 3)
    lines += _capped("metadata", [m.strip() for m in metadata_lines(layout.metadata)[1:]], 4)
    n = len(layout) + len(layout.skipped)
    lines.append(
        f"module tree left out: {n:,} names is over the summary's budget of {limit:,} (about 30 us each); "
        f"build it with layout.tree(), or raise the budget: with tv.limits(tree_names={n:_}): print(layout)"
    )
    lines.append(hint)
    return "\n".join(map(shown, lines))


def _fitting_tree(tree, tree_lines, budget: int) -> list[str]:
    """The deepest tree view (at most 5 children a node) that fits ``budget`` lines."""
    for depth in (6, 5, 4, 3, 2, 1):
        lines = tree_lines(tree, depth=depth, max_children=5)
        if len(lines) <= budget:
            return lines
    return tree_lines(tree, depth=1, max_children=max(2, budget - 1))[:budget]


def _borrower_lines(tree, limit: int) -> list[str]:
    """``name relation owner`` for the names that read bytes counted under an earlier name,
    titled and capped as :func:`_capped` does (only the nodes shown are made)."""
    n, nodes = tree.borrowers(limit)
    items = [_borrower(node) for node in nodes]
    return _capped("names whose bytes are counted under another name", items, limit, n)


def _borrower(node) -> str:
    relation, owner = node.counted_in
    here = f" ({format_bytes(node.nbytes)} counted here)" if node.nbytes else ""
    return f"{node.path} {RELATION_WORDS.get(relation, relation)} {owner}{here}"


def _names_brief(names: tuple[str, ...], limit: int = 4) -> str:
    more = f", … {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _capped(title: str, items: list[str], limit: int, total: int | None = None) -> list[str]:
    """A titled list of at most ``limit`` lines, the rest counted ("… 7 more"); ``items`` may
    be the first ``limit`` of ``total``."""
    total = len(items) if total is None else total
    if not total:
        return [f"{title}: none"] if title.startswith("shared") else []
    items_shown = items if total <= limit else items[: limit - 1]
    rest = [f"  … {total - len(items_shown)} more"] if len(items_shown) < total else []
    return [f"{title}: {total}", *(f"  {shown(item)}" for item in items_shown), *rest]
