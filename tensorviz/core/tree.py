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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Any, Protocol

import numpy as np

from tensorviz.core import hooks
from tensorviz.core.attribution import BIG_PAIRS, Attribution, Big, Others, Painted, owners
from tensorviz.core.categories import TRAINING_ROLES, category_bytes, category_words, optimizer_name, role
from tensorviz.core.keepalive import storages_kept_alive
from tensorviz.core.names import elide, shown, terminal
from tensorviz.core.pieces import logical_nbytes
from tensorviz.core.records import LayoutLike, Piece, TensorView, record
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
    For a tensor, ``partners`` are the names whose bytes intersect its own (exact in groups of
    any size; the rest of its overlap group stands in only past
    :data:`~tensorviz.core.attribution.BIG_PAIRS` reader pairs, or for a group of more than 64
    names with towers) and ``counted_in`` is
    ``(relation, name)`` of the earlier name that owns (some of) its bytes, e.g.
    ``("identical", "embed.weight")`` for a tied weight, or ``()``.
    ``piece`` is set on a logical tensor stored in pieces (a torchao weight, a GPTQ ``qweight``
    with its scales; the pieces are its children); ``unpacked`` on it and every prefix above it
    is ``(bytes, dtypes)``: what the prefix would take with those tensors in their logical
    dtypes (other tensors as stored), beside ``nbytes`` as stored.
    """

    path: str
    kind: str
    children: Sequence[Node]  # largest first; made on first read (compares like a tuple)
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
    _store: _Store | None = field(default=None, repr=False, compare=False)  # the columns nodes are made from

    def find(self, path: str) -> Node:
        """The node of a prefix or tensor name (KeyError naming the nearest existing prefix)."""
        store = self._store
        if store is not None and path in store.ids:
            return store.node(store.ids[path])
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

    def borrowers(self, limit: int | None = None) -> tuple[int, list[Node]]:
        """How many tensors have their bytes counted under an earlier name (``counted_in``
        set), and the first ``limit`` of them (all when None) in :meth:`nodes` order; only
        those nodes are made (``print(layout)`` shows a few of thousands of tied names)."""
        store = self._store
        if store is None:
            found = [n for n in self.nodes() if n.counted_in]
            return len(found), found[:limit]
        ids = store.counted_ids()
        return len(ids), [store.node(k) for k in store.preorder(ids)[:limit]]

    def count(self) -> int:
        """How many modules and tensors the tree holds (the root not counted), no node made."""
        store = self._store
        return len(store.paths) - 1 if store is not None else sum(1 for _ in self.nodes()) - 1

    def to_text(self, depth: int | None = None, max_children: int | None = None) -> str:
        """One line per module or tensor, largest first (see :func:`tree_text`)."""
        return tree_text(self, depth, max_children)

    def __str__(self) -> str:
        return self.to_text(depth=3, max_children=8)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        """Text and a collapsible HTML tree (no JavaScript; see :mod:`tensorviz.render.html.tree`)."""
        return {"text/plain": str(self), "text/html": hooks.call("tree.html", self)}


def model_tree(layout: LayoutLike) -> ModelTree:
    """The module tree of a layout (see the module docstring for how bytes are attributed).

    Columnar: every prefix is numbered once, per-prefix totals are sums over numpy columns
    (level by level, ``np.add.at``), and a :class:`Node` is made only when a caller reads it
    (``print`` folds repeated layers, so most nodes of a large model are never made)."""
    a = owners(layout)
    cols = _Columns(layout, np.asarray(a.own, dtype=np.int64))
    store = _Store(layout, cols, a.partners, a.counted, category_bytes(layout, a.own, _prefixes))
    store.shared = _shared_bytes(a, store)
    return ModelTree(store.node(0), store.total, layout.storage_nbytes, bool(cols.mods), optimizer_name(layout), store)


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


def _parent(path: str) -> str:
    """The prefix above ``path`` (past :data:`MAX_DEPTH` parts, the prefix of the first 63)."""
    if len(path) >= MAX_DEPTH and path.count(".") >= MAX_DEPTH:
        return ".".join(path.split(".", MAX_DEPTH - 1)[: MAX_DEPTH - 1])
    return path.rpartition(".")[0]


def _shared_bytes(a: Attribution, store: _Store) -> np.ndarray:
    """Per node, the distinct bytes its names read minus the bytes attributed to it (nonzero
    only for a prefix holding some but not all names of a shared group): for the painted
    groups, from their (readers, bytes) entries in numpy (:func:`_painted_shared`), for the
    others (big groups, towers) name by name."""
    shared = np.zeros(len(store.paths), dtype=np.int64)
    pt = a.painted
    if pt is not None and pt.members.size:
        _painted_shared(pt, store, shared)
    big, by_name = a.big, list(a.rest)
    if big is not None and not _big_shared(big, store, shared):
        by_name += big.groups.tolist()  # too many (piece, reader) pairs to list: name by name
    rest = [a.groups[g] for g in sorted(by_name)]
    if rest:
        pos = store.leaf
        owned = {n: a.own[pos[n]] for names in rest for n in names}
        for path, nbytes in _shared_per_prefix(rest, owned, a.distinct).items():
            shared[store.ids[path]] += nbytes
    return shared


def _big_shared(big: Big, store: _Store, shared: np.ndarray) -> bool:
    """Adds to ``shared`` the big groups' shared bytes (:func:`_shared_per_prefix`, per piece):
    a piece counts once for every node holding one of its readers but not its first reader.
    False (nothing added) when the (piece, node) pairs would be too many to list."""
    if big.piece is None or big.member is None:
        return False
    if big.piece.size * int(store.level.max(initial=0) + 1) > BIG_PAIRS:
        return False
    n = len(store.paths)
    node, piece = store.leaves[big.members[big.member]], big.piece
    held = _up_keys(node, piece, store.parent, n)
    read = big.reader >= 0
    first = _up_keys(store.leaves[big.members[big.reader[read]]], np.flatnonzero(read), store.parent, n)
    held = held[~_sorted_in(held, first)]
    np.add.at(shared, held % n, big.length[held // n])
    return True


def _up_keys(node: np.ndarray, piece: np.ndarray, parent: np.ndarray, n: int) -> np.ndarray:
    """The distinct keys ``piece * n + node`` of every node and each of its ancestors (root
    included), sorted."""
    keys = [_distinct_keys(piece * n + node)]
    while keys[-1].size:
        up = parent[keys[-1] % n]
        ok = up >= 0
        keys.append(_distinct_keys((keys[-1] // n)[ok] * n + up[ok]))
    return _distinct_keys(np.concatenate(keys))


def _distinct_keys(a: np.ndarray) -> np.ndarray:
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if a.size else a


def _sorted_in(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per value of ``a``, whether it is in the sorted distinct array ``b``."""
    at = np.minimum(np.searchsorted(b, a), max(b.size - 1, 0))
    return b[at] == a if b.size else np.zeros(a.size, dtype=bool)


def _painted_shared(pt: Painted, store: _Store, shared: np.ndarray) -> None:
    """Adds to ``shared``, per node holding some but not all members of a painted group (mask
    ``inside``), the bytes of the group read inside whose first reader is outside."""
    one = np.uint64(1)
    gid = np.repeat(np.arange(pt.size.size), pt.size)
    bit = np.left_shift(one, (np.arange(pt.members.size) - pt.first[gid]).astype(np.uint64))
    node, g, m = store.leaves[pt.members], gid, bit
    nodes, gs, ms = [node], [g], [m]
    while node.size:
        node = store.parent[node]
        keep = node >= 0
        node, g, m = node[keep], g[keep], m[keep]
        nodes.append(node)
        gs.append(g)
        ms.append(m)
    key_g, key_n, inside = _or_by(np.concatenate(gs), np.concatenate(nodes), np.concatenate(ms))
    size = pt.size[key_g].astype(np.uint64)
    full = np.where(size >= 64, ~np.uint64(0), np.left_shift(one, size % np.uint64(64)) - one)
    part = inside != full
    key_g, key_n, inside = key_g[part], key_n[part], inside[part]
    cuts = np.searchsorted(pt.gid, np.arange(pt.size.size + 1))
    lo, n = cuts[key_g], cuts[key_g + 1] - cuts[key_g]
    idx = np.repeat(np.arange(key_g.size), n)
    ent = np.arange(idx.size) - np.repeat(np.cumsum(n) - n, n) + np.repeat(lo, n)
    m, mine = pt.mask[ent], inside[idx]
    owner = m & (~m + one)
    hit = ((m & mine) != 0) & ((owner & mine) == 0)
    np.add.at(shared, key_n[idx[hit]], pt.nbytes[ent[hit]])


def _or_by(g: np.ndarray, n: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ``(g, n)`` pairs and the OR of ``m`` over each."""
    order = np.lexsort((n, g))
    g, n, m = g[order], n[order], m[order]
    cut = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (n[1:] != n[:-1])]) if g.size else np.zeros(0, np.int64)
    return g[cut], n[cut], np.bitwise_or.reduceat(m, cut) if cut.size else m[:0]


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


class _Columns:
    """Per view, what the tree sums: owned bytes and elements, parameter/buffer flags, and the
    ids of its dtype, device and file (ids in sorted order of the words, ``-1`` for none);
    read from the layout's columns when it has them, else from its view records."""

    def __init__(self, layout: LayoutLike, own: np.ndarray) -> None:
        mods = self.mods = layout.facts.modules
        self.classes = mods.get("classes", {}) if isinstance(mods.get("classes"), Mapping) else {}
        self.buffers, self.unsaved = set(mods.get("buffers", ())), set(mods.get("not_saved", ()))
        self.names, self.cats = layout.names, layout.categories
        self.isparam, self.isbuf = self._flags(layout)
        self.own = own
        t, raw = getattr(layout, "_table", None), getattr(layout, "_raw", None)
        if t is not None and raw is not None:
            dtypes, devices, files, itemsize = self._from_table(t, raw)
        else:
            dtypes, devices, files, itemsize = self._from_views(layout.views)
            self.logical = {i: v.logical for i, v in enumerate(layout.views) if v.logical}
            self.pieces = {i: v.piece for i, v in enumerate(layout.views) if v.piece is not None}
        numel = np.where(itemsize > 0, own // np.maximum(itemsize, 1), 0)
        for i, lg in self.logical.items():
            if lg.block_nbytes:
                numel[i] = int(own[i]) * lg.block // lg.block_nbytes
        self.numel = numel
        self.sets = (dtypes, devices, files)

    def role(self, i: int) -> str:
        """View ``i``'s role (see :func:`~tensorviz.core.categories.role`)."""
        return role(self.names[i], self.cats[i], bool(self.mods), self.buffers, self.unsaved)

    def _flags(self, layout: LayoutLike) -> tuple[np.ndarray, np.ndarray]:
        """Per view, 1 for a parameter, and 1 for a buffer: a live module's own tensors (not
        training state) are buffers where its facts name them, else parameters."""
        n = len(self.names)
        own = np.full(n, bool(self.mods))
        if own.any() and not TRAINING_ROLES.isdisjoint(set(self.cats)):
            own &= np.fromiter((c not in TRAINING_ROLES for c in self.cats), bool, n)
        buf = np.zeros(n, dtype=bool)
        if own.any() and (self.buffers or self.unsaved):
            buf[[i for i, name in enumerate(self.names) if name in self.buffers or name in self.unsaved]] = True
        buf &= own
        return (own & ~buf).astype(np.int64), buf.astype(np.int64)

    def _from_table(self, t: Any, raw: Any) -> tuple:
        """From the layout's columns: per distinct dtype, device and file one word each."""
        self.logical, self.pieces = dict(raw.logical), dict(raw.pieces)
        dnames = [d for d, _ in t.dtypes]
        words = sorted({*dnames, *(lg.dtype for lg in self.logical.values())} - {""})
        at = {w: k for k, w in enumerate(words)}
        dtype = np.array([at.get(d, -1) for d in dnames] + [-1], dtype=np.int64)[t.did]
        for i, lg in self.logical.items():
            dtype[i] = at.get(lg.dtype, -1)
        devices, dwords = _word_ids(list(t.devices))
        files, fwords = _word_ids(
            [_file_name(str(t.key(s)[1])) if d == "file" else "" for s, d in enumerate(t.devices)]
        )
        sidx = t.sidx
        return (dtype, words), (devices[sidx], dwords), (files[sidx], fwords), t.itemsize.astype(np.int64)

    @staticmethod
    def _from_views(views: tuple[TensorView, ...]) -> tuple:
        """From the view records (a layout without columns)."""
        dtypes = _word_ids([(v.logical or v).dtype for v in views])
        devices = _word_ids([v.device for v in views])
        files = _word_ids([_file_name(str(v.storage[1])) if v.device == "file" else "" for v in views])
        return dtypes, devices, files, np.fromiter((v.itemsize for v in views), np.int64, len(views))


def _word_ids(words: list[str]) -> tuple[np.ndarray, list[str]]:
    """Per word its id among the distinct non-empty words sorted (``-1`` for ""), and those."""
    distinct = sorted(set(words) - {""})
    at = {w: k for k, w in enumerate(distinct)}
    return np.fromiter((at.get(w, -1) for w in words), np.int64, len(words)), distinct


class _Store:
    """The tree as columns: every prefix numbered once (in order of first appearance), per node
    its parent, level and totals, children sorted largest first, and a :class:`Node` made on
    first read."""

    def __init__(self, layout: LayoutLike, cols: _Columns, partners: Mapping, counted: Mapping, cats: Mapping) -> None:
        self.layout, self.cols, self.partners, self.counted, self.cats = layout, cols, partners, counted, cats
        names = layout.names
        skipped = layout.skipped
        self.reasons: dict[str, str] = {}
        for sk in skipped:
            self.reasons.setdefault(sk.name, sk.reason)
        nv = len(names)
        ids, paths, parent, at = self._number([*names, *(sk.name for sk in skipped)])
        self.ids, self.paths = ids, paths
        n = len(paths)
        index = getattr(layout, "_index", None)  # the layout's own name -> position, when it has one
        self.leaf = index if index is not None else dict(zip(names, range(nv)))  # the last of a repeated name
        leaves = self.leaves = np.asarray(at[:nv], dtype=np.int64)
        sk_leaves = np.asarray(at[nv:], dtype=np.int64)
        parent_arr = np.asarray(parent, dtype=np.int64)
        dots = np.fromiter(map(methodcaller("count", "."), paths), np.int64, n)
        level = self.level = np.minimum(dots + 1, MAX_DEPTH)
        level[0] = 0
        by_level = np.argsort(-level, kind="stable")
        cuts = np.flatnonzero(np.diff(level[by_level])) + 1
        self.steps = [s for s in np.split(by_level, cuts) if s.size and level[s[0]] > 0]
        self.parent = parent_arr
        leafvals = np.stack([np.ones(nv, np.int64), cols.isparam, cols.isbuf, cols.numel, cols.own], 1)
        vals = np.zeros((n, 6), dtype=np.int64)
        np.add.at(vals[:, :5], leaves, leafvals)
        np.add.at(vals[:, 5], sk_leaves, 1)
        for step in self.steps:
            np.add.at(vals, parent_arr[step], vals[step])
        self.vals = vals
        self.total = int(vals[0, 4])
        self.sets = [self._word_sets(ids_, leaves) for ids_, _ in cols.sets]
        self.words = [words for _, words in cols.sets]
        order = np.lexsort((np.arange(n), -vals[:, 4], parent_arr))[1:] if n > 1 else np.zeros(0, np.int64)
        self.kids_order = order
        self.kid_cuts = np.searchsorted(parent_arr[order], np.arange(n + 1))
        self.nodes: list[Node | None] = [None] * n
        self.shared = np.zeros(n, dtype=np.int64)  # see _shared_bytes
        self.tuples: dict[tuple, tuple[str, ...]] = {}
        self.kept = storages_kept_alive(layout)
        self.unpacked = _Unpacked(self, layout, cols) if cols.pieces else None

    @staticmethod
    def _number(names: list[str]) -> tuple[dict[str, int], list[str], list[int], list[int]]:
        """Ids of every prefix of ``names``: a prefix gets its id when first met, so siblings'
        ids follow the order of first appearance; each prefix's parent id; each name's id."""
        ids, paths, parent, at = {"": 0}, [""], [-1], []
        for name in names:
            k = ids.get(name)
            if k is not None:
                at.append(k)
                continue
            at.append(len(paths))
            path, below = name, -1
            while path not in ids:
                k = ids[path] = len(paths)
                paths.append(path)
                parent.append(-1)
                if below >= 0:
                    parent[below] = k
                below = k
                path = path.rpartition(".")[0] if len(path) < MAX_DEPTH else _parent(path)
            if below >= 0:
                parent[below] = ids[path]
        return ids, paths, parent, at

    def _word_sets(self, word: np.ndarray, leaves: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """Per node the distinct word ids under it: for at most 64 words a bit mask per node
        (ORed up level by level); else pairs ``node * K + word`` moved up one level at a time,
        kept distinct, sorted, with each node's first pair."""
        k = int(word.max()) + 2 if word.size else 1
        keep = word >= 0
        if k <= 65:
            mask = np.zeros(len(self.paths), dtype=np.uint64)
            np.bitwise_or.at(mask, leaves[keep], np.left_shift(np.uint64(1), word[keep].astype(np.uint64)))
            for step in self.steps:
                np.bitwise_or.at(mask, self.parent[step], mask[step])
            return mask, word[:0], word[:0]
        pairs = _distinct(leaves[keep] * k + word[keep])
        found = [pairs]
        while pairs.size:
            up = self.parent[pairs // k]
            ok = up >= 0
            pairs = _distinct(up[ok] * k + pairs[ok] % k)
            found.append(pairs)
        every = _distinct(np.concatenate(found))
        return None, every % k, np.searchsorted(every // k, np.arange(len(self.paths) + 1))

    def _words(self, which: int, node: int) -> tuple[str, ...]:
        """The sorted words (dtypes, devices or files) under a node, one shared tuple per set."""
        mask, word, cuts = self.sets[which]
        key: tuple = (
            (which, int(mask[node])) if mask is not None else (which, *word[cuts[node] : cuts[node + 1]].tolist())
        )
        out = self.tuples.get(key)
        if out is None:
            ids = [b for b in range(64) if key[1] >> b & 1] if mask is not None else key[1:]
            out = self.tuples[key] = tuple(self.words[which][w] for w in ids)
        return out

    def view(self, i: int) -> TensorView:
        """The record of view ``i`` (alone where the layout can make one alone)."""
        one = getattr(self.layout, "_view", None)
        return one(i) if one is not None else self.layout.views[i]

    def children(self, node: int) -> list[int]:
        return self.kids_order[self.kid_cuts[node] : self.kid_cuts[node + 1]].tolist()

    def counted_ids(self) -> list[int]:
        """The nodes of the views whose bytes are counted under another name."""
        return [self.ids[p] for p, c in self.counted.items() if c and p in self.leaf and p in self.ids]

    def preorder(self, nodes: list[int]) -> list[int]:
        """``nodes`` in depth-first, largest-first order (as :meth:`Node.walk` yields them),
        without making a node: each sorted by its siblings' ranks from the root down."""
        if not nodes:
            return []
        rank = np.zeros(len(self.paths), dtype=np.int64)
        order = self.kids_order
        rank[order] = np.arange(order.size) - self.kid_cuts[self.parent[order]]
        parent, rank_l = self.parent.tolist(), rank.tolist()

        def key(k: int) -> list[int]:
            ranks = []
            while k > 0:
                ranks.append(rank_l[k])
                k = parent[k]
            return ranks[::-1]

        return sorted(set(nodes), key=key)

    def count(self, node: int) -> int:
        return int(self.kid_cuts[node + 1] - self.kid_cuts[node])

    def node(self, k: int) -> Node:
        """The Node of prefix ``k``, made once."""
        made = self.nodes[k]
        if made is not None:
            return made
        path = self.paths[k]
        n, npar, nbuf, numel, nbytes, nskip = self.vals[k].tolist()
        i = self.leaf.get(path)
        view: TensorView | None = None
        if i is not None:
            kind, view, reason = self.cols.role(i), self.view(i), ""
            partners, counted = self.partners.get(path, ()), self.counted.get(path, ())
        else:
            kind, partners, counted = ("skipped" if path in self.reasons else ""), (), ()
            reason = self.reasons.get(path, "")
        classes = self.cols.classes
        made = self.nodes[k] = record(
            Node,
            (
                path,
                str(classes.get(path, kind)) if path in classes else kind,
                _Kids(self, k),
                n,
                npar,
                nbuf,
                numel,
                nbytes,
                int(self.shared[k]),
                nbytes / self.total if self.total else 0.0,
                self._words(0, k),
                self._words(1, k),
                self._words(2, k),
                nskip,
                partners,
                counted,
                view,
                reason,
                self.cats.get(path, ()),
                self.kept.get(path, ()),
                self.unpacked.piece(path) if self.unpacked else None,
                self.unpacked.of(k) if self.unpacked else (),
            ),
        )
        return made


class _Kids(Sequence):
    """A node's children, largest first, made on first read (compares like a tuple)."""

    __slots__ = ("store", "at", "made")

    def __init__(self, store: _Store, at: int) -> None:
        self.store, self.at = store, at
        self.made: tuple[Node, ...] | None = None

    def _all(self) -> tuple[Node, ...]:
        if self.made is None:
            self.made = tuple(map(self.store.node, self.store.children(self.at)))
        return self.made

    def __len__(self) -> int:
        return self.store.count(self.at) if self.made is None else len(self.made)

    def __getitem__(self, k):
        return self._all()[k]

    def __iter__(self) -> Iterator[Node]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (tuple, _Kids)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


class _Unpacked:
    """``Node.unpacked`` and ``Node.piece`` where some tensors are stored in pieces: the
    logical tensor's node, else the pieces' prefix (the module for a GPTQ qweight) holds the
    logical tensor; its size in its logical dtype counts there, once, if some piece owns
    bytes (a tied weight's second name owns none). Worked out for the prefixes above pieces."""

    def __init__(self, store: _Store, layout: LayoutLike, cols: _Columns) -> None:
        self.store = store
        self.pieces: dict[str, Piece] = {}
        self.own: dict[str, int] = {}
        names, counted = layout.names, set()
        for i in sorted(cols.pieces):
            pc, name, own = cols.pieces[i], names[i], int(cols.own[i])
            inside = name == pc.of or name.startswith(pc.of + ".")  # bitsandbytes: "weight" is a piece
            at = pc.of if inside else _prefixes(name)[-2]
            self.pieces.setdefault(at, pc)
            self.own.setdefault(at, 0)
            if own and pc.of not in counted:
                counted.add(pc.of)
                self.own[at] += logical_nbytes(pc) or own
        self.done: dict[int, tuple] = {}
        marked: dict[int, int] = {}  # node -> its level
        for k in (store.ids[p] for p in [*self.pieces, *(names[i] for i in cols.pieces)] if p in store.ids):
            while k >= 0 and k not in marked:
                marked[k] = store.level[k]
                k = int(store.parent[k])
        for k in sorted(marked, key=lambda k: -marked[k]):  # children first
            self.done[k] = self._make(k, cols.pieces)

    def _make(self, k: int, pieces: Mapping[int, Piece]) -> tuple:
        """``Node.unpacked`` of node ``k``: ``()`` when nothing under it is stored in pieces; else
        its logical tensors in their logical dtypes plus its other children as stored (a piece
        itself counts 0: its prefix counts the logical tensor)."""
        store = self.store
        path = store.paths[k]
        pc = self.pieces.get(path)
        vp = pieces.get(store.leaf[path]) if path in store.leaf else None
        if pc is None and vp is not None:
            return 0, (vp.dtype,)
        kids = store.children(k)
        dtypes = {d for c in kids if self.done.get(c) for d in self.done[c][1]} | ({pc.dtype} if pc else set())
        if not dtypes:
            return ()
        total = self.own.get(path, 0) + sum(
            self.done[c][0] if self.done.get(c) else int(store.vals[c, 4]) for c in kids
        )
        return total, tuple(sorted(dtypes))

    def piece(self, path: str) -> Piece | None:
        return self.pieces.get(path)

    def of(self, k: int) -> tuple:
        return self.done.get(k, ())


def _distinct(a: np.ndarray) -> np.ndarray:
    a = np.sort(a)
    return a[np.r_[True, a[1:] != a[:-1]]] if a.size else a


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


def alike_runs(children: Sequence[Node], least: int = 3) -> list[list[Node]]:
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
