"""The module tree of a Layout: what is in a model and where its memory goes.

Pure Python + numpy (no torch). Names split on "." into prefixes -- for a live module these are
exactly its submodules, whose class names the collector records in ``layout.metadata["modules"]``
together with which names are buffers. Every prefix gets totals: tensors, parameters and
buffers, elements, bytes, dtypes, devices, files and skipped values.

**Bytes are counted once.** Each byte is attributed to the *first* name, in source order, whose
footprint reads it (for a module: state-dict order, so a tied ``lm_head.weight`` that comes after
``embed_tokens.weight`` owns nothing). Later names that read the same bytes own only what no
earlier name read; they are marked as sharing with their partners (``Node.partners``), and a
prefix whose tensors read bytes owned outside it reports them as ``shared_nbytes``. Hence the
root's ``nbytes`` is ``layout.unique_nbytes`` and the children of any node add up to it.
Bytes of a storage that no view reads (unreferenced) belong to no prefix.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(10, 4)
>>> t = model_tree(tv.analyze({"emb.weight": w, "head.weight": w, "head.bias": torch.zeros(10)}))
>>> [(n.path, n.nbytes, n.shared_nbytes) for n in t.root.children]
[('emb', 160, 0), ('head', 40, 160)]
>>> t.find("head.weight").partners
('emb.weight',)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from tensorviz.core import hooks
from tensorviz.core.attribution import Others, attribution
from tensorviz.core.categories import category_bytes, category_words, optimizer_name, role
from tensorviz.core.keepalive import storages_kept_alive
from tensorviz.core.names import elide, shown, terminal
from tensorviz.core.pieces import logical_nbytes
from tensorviz.core.records import LayoutLike, Piece, TensorView
from tensorviz.core.units import format_bytes

__all__ = [
    "Node",
    "ModelTree",
    "model_tree",
    "TreeLayout",
    "tree_text",
    "tree_lines",
    "format_count",
    "alike_runs",
    "Others",
    "RELATION_WORDS",
    "unpacked_words",
]


class TreeLayout(LayoutLike, Protocol):
    """A layout with its module tree: what the text summary reads (the Layout satisfies it)."""

    def tree(self) -> ModelTree: ...


@dataclass(frozen=True)
class Node:
    """One prefix (a module) or one tensor name, with totals over every tensor under it.

    ``nbytes`` counts the bytes attributed to this prefix (see the module docstring) and
    ``numel`` the elements in them (so a tied weight's elements are counted once, where its
    bytes are); ``shared_nbytes`` the distinct bytes its tensors read that are attributed
    elsewhere.
    ``kind`` is the module's class name when known, else ``"parameter"``, ``"buffer"``,
    ``"buffer (not saved)"``, ``"tensor"`` or ``"skipped"`` for a name, ``""`` for a plain prefix.
    For a tensor, ``partners`` are the names whose bytes intersect its own and ``counted_in`` is
    ``(relation, name)`` of the earlier name that owns (some of) its bytes, e.g.
    ``("identical", "embed.weight")`` for a tied weight, or ``()``.
    ``piece`` is set on a logical tensor stored in pieces (a torchao weight, a GPTQ ``qweight``
    with its scales; the pieces are its children); ``unpacked`` on it and every prefix above it
    is ``(bytes, dtypes)``: what the prefix would take with those tensors in their logical
    dtypes (other tensors as stored), beside ``nbytes`` as stored.
    """

    path: str
    kind: str
    children: tuple[Node, ...]
    ntensors: int
    nparams: int
    nbuffers: int
    numel: int
    nbytes: int
    shared_nbytes: int
    fraction: float
    dtypes: tuple[str, ...]
    devices: tuple[str, ...]
    files: tuple[str, ...]
    nskipped: int
    partners: tuple[str, ...] = ()
    counted_in: tuple[str, str] | tuple[()] = ()
    view: TensorView | None = field(default=None, repr=False)
    reason: str = ""
    categories: tuple[tuple[str, int], ...] = ()  # training state: bytes per category, counted once
    kept: tuple[int, int] | tuple[()] = ()  # (storage bytes, bytes of it no tensor reads): core.keepalive
    piece: Piece | None = None  # a logical tensor stored in pieces (its children): core.pieces
    unpacked: tuple[int, tuple[str, ...]] | tuple[()] = ()  # (bytes as logical dtypes, those dtypes) over pieces

    @property
    def name(self) -> str:
        """The last part of the path (``"(model)"`` for the root)."""
        return self.path.rpartition(".")[2] if self.path else "(model)"

    @property
    def depth(self) -> int:
        return self.path.count(".") + 1 if self.path else 0

    @property
    def is_tensor(self) -> bool:
        return self.view is not None or self.kind == "skipped"

    @property
    def tied(self) -> bool:
        """A tensor whose bytes are all counted under an earlier name."""
        return self.view is not None and self.nbytes == 0 and self.shared_nbytes > 0

    def walk(self, depth: int | None = None) -> Iterator[Node]:
        """This node and its descendants, depth first, largest first; ``depth`` levels below."""
        yield self
        if depth is None or depth > 0:
            for c in self.children:
                yield from c.walk(None if depth is None else depth - 1)


@dataclass(frozen=True)
class ModelTree:
    """The tree (:attr:`root`) plus the layout-wide totals it was measured against."""

    root: Node
    total_nbytes: int
    storage_nbytes: int
    has_modules: bool
    optimizer: str = ""  # the optimizer's class name, for "Adam 2.0 GiB" in category totals

    def find(self, path: str) -> Node:
        """The node of a prefix or tensor name (KeyError naming the nearest existing prefix)."""
        node = self.root
        for part in path.split(".") if path else ():
            nxt = next((c for c in node.children if c.name == part), None)
            if nxt is None:
                where = f"under {node.path!r}" if node.path else "at the top"
                raise KeyError(f"no module or tensor {path!r}: {part!r} is not {where}") from None
            node = nxt
        return node

    def nodes(self, depth: int | None = None) -> Iterator[Node]:
        return self.root.walk(depth)

    def to_text(self, depth: int | None = None, max_children: int | None = None) -> str:
        """One line per module or tensor, largest first (see :func:`tree_text`)."""
        return tree_text(self, depth, max_children)

    def __str__(self) -> str:
        return self.to_text(depth=3, max_children=8)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        """Text and a collapsible HTML tree (no JavaScript; see :mod:`tensorviz.render.html.tree`)."""
        return {"text/plain": str(self), "text/html": hooks.call("tree.html", self)}


def model_tree(layout: LayoutLike) -> ModelTree:
    """The module tree of a layout (see the module docstring for how bytes are attributed)."""
    views = layout.views
    own, distinct_groups, partners, counted, distinct = attribution(layout)
    mods = layout.facts.modules
    classes = mods.get("classes", {}) if isinstance(mods.get("classes"), Mapping) else {}
    buffers = set(mods.get("buffers", ()))
    unsaved = set(mods.get("not_saved", ()))
    acc = _Acc()
    for i, v in enumerate(views):
        kind = role(v.name, v.category, bool(mods), buffers, unsaved)
        acc.add_view(v, kind, own[i], partners.get(v.name, ()), counted.get(v.name, ()))
    acc.cats = category_bytes(layout, own, _prefixes)
    for sk in layout.skipped:
        acc.add_skipped(sk.name, sk.reason)
    acc.kept = storages_kept_alive(layout)
    grouped = {n for names in distinct_groups for n in names}
    owned = {n: own[i] for i, n in enumerate(layout.names) if n in grouped}
    shared = _shared_per_prefix(distinct_groups, owned, distinct)
    total = sum(own)
    root = acc.freeze("", classes, shared, total)
    return ModelTree(root, total, layout.storage_nbytes, bool(mods), optimizer_name(layout))


#: Deepest level of the tree: the parts of a name past it form one leaf (a dict nested 5,000
#: deep is valid input; the tree and its text, HTML and explorer panel recurse per level).
MAX_DEPTH = 64


def _prefixes(name: str) -> list[str]:
    """``""`` and every module prefix of ``name``, ending with ``name`` itself.

    >>> _prefixes("a.b.c")
    ['', 'a', 'a.b', 'a.b.c']
    >>> len(_prefixes(".".join(["k"] * 5000)))
    65
    """
    parts = name.split(".")
    if len(parts) > MAX_DEPTH:
        parts = parts[: MAX_DEPTH - 1] + [".".join(parts[MAX_DEPTH - 1 :])]
    return [".".join(parts[:k]) for k in range(len(parts) + 1)]


def _shared_per_prefix(groups: list[tuple[str, ...]], own: dict[str, int], distinct: Callable) -> dict[str, int]:
    """Per prefix, distinct bytes its names read minus the bytes attributed to it, for every
    prefix holding some but not all names of a shared group (a prefix holding all of them owns
    all their bytes; elsewhere there is nothing shared)."""
    shared: dict[str, int] = {}
    for names in groups:
        members: dict[str, list[str]] = {}
        for name in names:
            for p in _prefixes(name):
                members.setdefault(p, []).append(name)
        for p, inside in members.items():
            if len(inside) == len(names):
                continue
            shared[p] = shared.get(p, 0) + distinct(inside) - sum(own[n] for n in inside)
    return shared


def _file_name(ident: str) -> str:
    """The file a file storage is in: a safetensors file's path, or a torch checkpoint's path
    before its ``:data/N`` record suffix."""
    head, sep, tail = ident.rpartition(":")
    return os.path.basename(head if sep and "data/" in tail else ident)


_NONE: frozenset[str] = frozenset()


class _Acc:
    """Mutable totals per prefix while walking the views once."""

    def __init__(self) -> None:
        self.stats: dict[str, list] = {}
        self.singles: dict[str, frozenset[str]] = {}  # a dtype, device or file -> {it}, shared by every name
        self.sorted_sets: dict[frozenset[str], tuple[str, ...]] = {}  # see _sorted
        self.kids: dict[str, dict[str, None]] = {}
        self.leaf: dict[str, tuple] = {}
        self.kept: dict[str, tuple[int, int]] = {}
        self.cats: dict[str, tuple[tuple[str, int], ...]] = {}
        self.pieces: dict[str, Piece] = {}  # prefix holding pieces -> the first piece's record
        self.unpacked: dict[str, int] = {}  # name or prefix -> its own bytes as logical dtypes
        self.counted: set[str] = set()  # logical tensors whose size is counted (once, at one prefix)

    def _bump(self, name: str, numel: int, nbytes: int, role: str, sets: tuple, skipped: int) -> None:
        """Record one name's own totals; prefixes sum their children when frozen."""
        chain = _prefixes(name)
        kids = self.kids
        for parent, child in zip(reversed(chain[:-1]), reversed(chain[1:])):
            siblings = kids.setdefault(parent, {})
            if child in siblings:  # the rest of the chain is registered already
                break
            siblings[child] = None
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = [0, 0, 0, 0, 0, _NONE, _NONE, _NONE, 0]
        s[0] += 1 - skipped
        s[1] += role == "parameter"
        s[2] += role.startswith("buffer")
        s[3] += numel
        s[4] += nbytes
        for k, item in zip((5, 6, 7), sets):
            if item and item not in s[k]:  # one shared frozenset per value: a set per name was ~650 B
                s[k] = self.singles.setdefault(item, frozenset((item,))) if not s[k] else s[k] | {item}
        s[8] += skipped

    def add_view(self, v: TensorView, role: str, own: int, partners: tuple, counted: tuple) -> None:
        file, lg = _file_name(str(v.storage[1])) if v.device == "file" else "", v.logical  # lg: quantized bytes
        numel = own * lg.block // lg.block_nbytes if lg and lg.block_nbytes else own // v.itemsize if v.itemsize else 0
        self._bump(v.name, numel, own, role, (lg.dtype if lg else v.dtype, v.device, file), 0)
        self.leaf[v.name] = (role, v, partners, counted, "")
        pc = v.piece
        if pc is None:
            return
        # The logical tensor's node, else the pieces' prefix (the module for a GPTQ qweight)
        # holds the logical tensor: its size in its logical dtype counts there, once, if some
        # piece owns bytes (a tied weight's second name owns none).
        inside = v.name == pc.of or v.name.startswith(pc.of + ".")  # bitsandbytes: "weight" is a piece
        at = pc.of if inside else _prefixes(v.name)[-2]
        self.pieces.setdefault(at, pc)
        self.unpacked.setdefault(at, 0)
        if own and pc.of not in self.counted:
            self.counted.add(pc.of)
            self.unpacked[at] += logical_nbytes(pc) or own

    def _unpacked(self, path: str, kids: list[Node]) -> tuple[int, tuple[str, ...]] | tuple[()]:
        """``Node.unpacked`` of ``path``: ``()`` when nothing under it is stored in pieces; else
        its logical tensors in their logical dtypes plus its other children as stored (a piece
        itself counts 0: its prefix counts the logical tensor)."""
        pc, view = self.pieces.get(path), self.leaf.get(path, (None, None))[1]
        if pc is None and view is not None and view.piece is not None:
            return 0, (view.piece.dtype,)
        dtypes = {d for k in kids if k.unpacked for d in k.unpacked[1]} | ({pc.dtype} if pc else set())
        if not dtypes:
            return ()
        total = self.unpacked.get(path, 0) + sum(k.unpacked[0] if k.unpacked else k.nbytes for k in kids)
        return total, tuple(sorted(dtypes))

    def _sorted(self, items: set[str]) -> tuple[str, ...]:
        """``tuple(sorted(items))``, one shared tuple per distinct set (a node per tensor)."""
        key = frozenset(items)
        out = self.sorted_sets.get(key)
        if out is None:
            out = self.sorted_sets[key] = tuple(sorted(key))
        return out

    def add_skipped(self, name: str, reason: str) -> None:
        self._bump(name, 0, 0, "skipped", ("", "", ""), 1)
        self.leaf.setdefault(name, ("skipped", None, (), (), reason))

    def freeze(self, path: str, classes: Mapping, shared: Mapping[str, int], total: int) -> Node:
        kids = [self.freeze(c, classes, shared, total) for c in self.kids.get(path, {})]
        kids.sort(key=lambda n: -n.nbytes)  # stable: equal sizes keep source order
        own = self.stats.get(path) or [0, 0, 0, 0, 0, _NONE, _NONE, _NONE, 0]
        n, npar, nbuf, numel, nbytes, nskip = own[0], own[1], own[2], own[3], own[4], own[8]
        dtypes, devices, files = set(own[5]), set(own[6]), set(own[7])
        for k in kids:
            n, npar, nbuf, numel, nbytes, nskip = (
                n + k.ntensors,
                npar + k.nparams,
                nbuf + k.nbuffers,
                numel + k.numel,
                nbytes + k.nbytes,
                nskip + k.nskipped,
            )
            dtypes.update(k.dtypes)
            devices.update(k.devices)
            files.update(k.files)
        kind, view, partners, counted, reason = self.leaf.get(path, ("", None, (), (), ""))
        return Node(
            piece=self.pieces.get(path),
            unpacked=self._unpacked(path, kids),
            path=path,
            kind=str(classes.get(path, kind)) if path in classes else kind,
            children=tuple(kids),
            ntensors=n,
            nparams=npar,
            nbuffers=nbuf,
            numel=numel,
            nbytes=nbytes,
            shared_nbytes=shared.get(path, 0),
            fraction=nbytes / total if total else 0.0,
            dtypes=self._sorted(dtypes),
            devices=self._sorted(devices),
            files=self._sorted(files),
            nskipped=nskip,
            partners=partners,
            counted_in=counted,
            view=view,
            reason=reason,
            kept=self.kept.get(path, ()),
            categories=self.cats.get(path, ()),
        )


# -- text: one line per module or tensor, largest first ----------------------------------------


def format_count(n: int) -> str:
    """Element counts as people say them: 950, 12.3K, 8.03B.

    >>> format_count(950), format_count(12_345), format_count(8_030_261_248)
    ('950', '12.3K', '8.03B')
    """
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.3g}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


def tree_lines(tree: ModelTree, depth: int | None = None, max_children: int | None = None) -> list[str]:
    """Lines of the tree down to ``depth`` levels, at most ``max_children`` per node (the rest
    summed on one ``…`` line)."""
    rows: list[tuple[str, str]] = []
    _walk(tree.root, "", "", depth, max_children, rows, tree.optimizer)
    width = max(len(left) for left, _ in rows)
    return [f"{left:<{width}}  {right}".rstrip() for left, right in rows]


def tree_text(tree: ModelTree, depth: int | None = None, max_children: int | None = None) -> str:
    """Plain text of a module tree: one line per module or tensor, largest first.

    Each line: the name and kind, the bytes attributed to it (counted once), its share of the
    model, element count, and marks: ``↔`` a tensor whose bytes are also read under other names
    (the partners are named), ``shared`` a module that reads bytes counted elsewhere.

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(10, 4)
    >>> print(tree_text(model_tree(tv.analyze({"emb.weight": w, "head.weight": w}))))
    (model)           160 B 100.0%     40 elements
    ├─ emb            160 B 100.0%     40
    │  └─ weight      160 B 100.0%     40  float32[10, 4]  ↔ shared with head.weight
    └─ head             0 B   0.0%      0  shared 160 B counted elsewhere
       └─ weight        0 B   0.0%      0  float32[10, 4]  ↔ tied to emb.weight (counted there)
    """
    return "\n".join(map(shown, tree_lines(tree, depth, max_children)))  # a skip reason is data too


def _walk(node: Node, lead: str, indent: str, depth: int | None, cap: int | None, rows: list, opt: str = "") -> None:
    rows.append((lead + _label(node), _numbers(node, root=not node.path, optimizer=opt)))
    if depth is not None and depth <= 0:
        return
    kids = alike_runs(node.children)
    shown = kids if cap is None or len(kids) <= cap else kids[: cap - 1]
    rest = [c for run in kids[len(shown) :] for c in run]
    for i, run in enumerate(shown):
        last = i == len(shown) - 1 and not rest
        lead, below = indent + ("└─ " if last else "├─ "), indent + ("   " if last else "│  ")
        if len(run) == 1:
            _walk(run[0], lead, below, _less(depth), cap, rows, opt)
            continue
        rows.append((lead + _run_label(run), _run_numbers(run)))
        if depth is None or depth > 1:  # one of them stands for all
            _walk(run[0], below + "└─ ", below + "   ", _less(_less(depth)), cap, rows, opt)
    if rest:
        nbytes = sum(c.nbytes for c in rest)
        share = nbytes / node.nbytes * node.fraction if node.nbytes else 0.0
        rows.append((f"{indent}└─ … {len(rest)} more", f"{format_bytes(nbytes):>9} {share:6.1%}"))


def alike_runs(children: tuple[Node, ...], least: int = 3) -> list[list[Node]]:
    """Children split into runs; ``least`` or more alike numbered modules in a row (the layers
    of a transformer: same class, bytes and elements) form one run, shown once."""
    out: list[list[Node]] = []
    for child in children:
        prev = out[-1][0] if out else None
        if prev is not None and _alike(prev, child):
            out[-1].append(child)
        else:
            out.append([child])
    return [piece for run in out for piece in ([run] if len(run) >= least else [[c] for c in run])]


def _alike(a: Node, b: Node) -> bool:
    """Numbered siblings (a ModuleList's layers) of one class with the same sizes."""
    same = (a.kind, a.nbytes, a.numel, a.ntensors) == (b.kind, b.nbytes, b.numel, b.ntensors)
    return same and bool(a.kind) and not a.is_tensor and a.name.isdigit() and b.name.isdigit()


def _run_label(run: list[Node]) -> str:
    return f"{_show(run[0].name)} … {_show(run[-1].name)}  {len(run)} × {_show(run[0].kind)}"


def _run_numbers(run: list[Node]) -> str:
    nbytes = sum(n.nbytes for n in run)
    text = f"{format_bytes(nbytes):>9} {sum(n.fraction for n in run):6.1%} {format_count(sum(n.numel for n in run)):>6}"
    return text + f"  ({format_bytes(run[0].nbytes)} each; one shown)"


def _less(depth: int | None) -> int | None:
    return None if depth is None else depth - 1


def _label(node: Node) -> str:
    name = _show(node.name)
    if node.is_tensor or not node.kind:
        return name
    return f"{name}  {_show(node.kind)}" if node.path else _show(node.kind)


def unpacked_words(node: Node) -> str:
    """A logical tensor stored in pieces by its kind and logical shape, and a prefix's size with
    such tensors in their logical dtypes, beside the bytes stored."""
    text = ""
    pc = node.piece
    if pc is not None:
        bits = f" int{pc.bits}" if pc.bits else ""
        group = f", group {'×'.join(map(str, pc.group))}" if pc.group else ""
        text += f"  {pc.kind} {pc.dtype}[{', '.join(map(str, pc.shape))}]{bits}{group}"
    if node.unpacked and (pc is not None or (node.view is None and node.unpacked[0])):
        unpacked, dtypes = node.unpacked
        text += f"  stored; {format_bytes(unpacked)} as {'/'.join(dtypes)}"
    return text


def _numbers(node: Node, root: bool = False, optimizer: str = "") -> str:
    if node.kind == "skipped":
        return f"{'—':>9} {'':6}  skipped: {node.reason}"
    text = f"{format_bytes(node.nbytes):>9} {node.fraction:6.1%} {format_count(node.numel):>6}"
    if root:
        text += " elements"
    if node.view is not None:
        shown = node.view.logical or node.view  # a quantized tensor by its ggml type and logical shape
        text += f"  {shown.dtype}[{', '.join(map(str, shown.shape))}]"
        if node.kind.startswith("buffer"):
            text += f"  {node.kind}"
    text += unpacked_words(node)
    if node.partners:
        text += "  ↔ " + _partner_text(node)
    elif node.shared_nbytes:
        text += f"  shared {format_bytes(node.shared_nbytes)} counted elsewhere"
    if node.kept:
        whole, unread = node.kept
        text += (
            f"  keeps its {format_bytes(whole)} storage alive; {unread:,} B of it no tensor reads (.clone() frees them)"
        )
    if not node.is_tensor and node.nskipped:
        text += f"  ({node.nskipped} skipped)"
    if len(node.categories) > 1:  # training state: what the module's bytes are
        text += "  " + category_words(node.categories, optimizer)
    return text


RELATION_WORDS = {
    "identical": "tied to",
    "same-bytes": "same bytes as",
    "within": "inside",
    "contains": "contains",
    "overlaps": "overlaps",
}


def _partner_text(node: Node, limit: int = 3) -> str:
    if node.counted_in:
        relation, owner = node.counted_in
        where = "counted there" if node.nbytes == 0 else f"{format_bytes(node.nbytes)} counted here"
        others = len(node.partners) - 1
        more = f"; shares with {others} more" if others > 0 else ""
        return f"{RELATION_WORDS.get(relation, relation)} {_show(owner)} ({where}{more})"
    names = ", ".join(_show(p) for p in node.partners[:limit])
    more = f", … {len(node.partners) - limit} more" if len(node.partners) > limit else ""
    return f"shared with {names}{more}"


def _show(text: str) -> str:
    """A name as a terminal may print it: escaped controls, elided when very long."""
    return elide(terminal(text), 80)
