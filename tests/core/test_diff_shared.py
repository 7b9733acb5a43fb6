"""tv.diff reads a tensor object on both sides once (tensorviz.sources.shared_reads): the diff
must equal the diff of two layouts analysed apart, and nothing may outlive the call.

Differential: random state dicts (ties, row and column slices, transposes, casts, clones, new
and dropped names, wrapper prefixes), side b holding some of a's very tensor objects, compared
field by field with ``diff_layouts(tv.analyze(a), tv.analyze(b))`` run without sharing. A
mapping that makes a fresh tensor on every read checks that a row is never taken for another
tensor that happens to get a freed tensor's id.
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from collections.abc import Iterator, Mapping
from unittest.mock import patch

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core import layout as layout_module
from tensorviz.core.diff import LayoutDiff, diff_layouts
from tensorviz.core.table import Table, derive
from tensorviz.sources.shared import SHARED_READS, shared_reads
from tests.helpers.models import tiny_gpt2


def _fields(d: LayoutDiff) -> dict:
    """Every field of ``d`` but its layouts; the matching as a list (a numpy column)."""
    out = {f.name: getattr(d, f.name) for f in dataclasses.fields(d) if f.name not in ("layout_a", "layout_b")}
    out["matches"] = None if d.matches is None else d.matches.tolist()
    return out


def _table(layout: tv.Layout) -> dict:
    """Every column of a layout's table, geometries by their facts (a derived table shares
    the other side's Geometry objects)."""
    t = layout._table
    out = {name: getattr(t, name) for name in Table.__slots__ if name != "_keys"}
    out["geos"] = [(g.shape, g.stride, g.numel, g.reach, g.footprint, g.dense, g.exact) for g in t.geos]
    return {k: (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v for k, v in out.items()}


def _check(a, b) -> int:
    """tv.diff(a, b) equals the diff of a and b analysed apart, b's table (derived from a's when
    b copied rows of a) equals b's table built from its own rows column by column; returns how
    many tables were derived."""
    alone = diff_layouts(tv.analyze(a), tv.analyze(b))
    made = []
    with patch.object(layout_module, "derive_table", lambda *args: made.append(derive(*args)) or made[-1]):
        shared = tv.diff(a, b)
    assert _fields(shared) == _fields(alone)
    assert shared.modules(depth=None) == alone.modules(depth=None)
    assert shared.layout_b.views == alone.layout_b.views
    assert _table(shared.layout_b) == _table(alone.layout_b) and _table(shared.layout_a) == _table(alone.layout_a)
    assert SHARED_READS.get() is None
    return sum(t is not None for t in made)


def _side_a(n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd: dict[str, torch.Tensor] = {}
    for i in range(n):
        base = torch.empty(4, 6)
        kind = int(torch.randint(0, 5, (1,), generator=g))
        sd[f"l.{i}.w"] = base
        if kind == 1:
            sd[f"l.{i}.tied"] = base
        elif kind == 2:
            sd[f"l.{i}.row"] = base[1:3]
        elif kind == 3:
            sd[f"l.{i}.col"] = base[:, 2]
        elif kind == 4:
            sd[f"l.{i}.t"] = base.t()
    return sd


_EDIT = st.sampled_from(["same", "half", "clone", "drop", "detach"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 12),
    st.integers(0, 10**6),
    st.lists(_EDIT, min_size=40, max_size=40),
    st.sampled_from(["", "module.", "_orig_mod.", "model."]),
    st.sampled_from(["kept", "reversed", "swapped", "new first"]),
)
def test_shared_reads_change_no_answer(n: int, seed: int, edits: list[str], prefix: str, order: str) -> None:
    """Side b holds some of a's tensors, in a's order or not (the walk looks for each where
    a's order puts it, then by id), and new ones in between."""
    a = _side_a(n, seed)
    b: dict[str, torch.Tensor] = {}
    for (name, t), edit in zip(a.items(), edits):
        if edit == "drop":
            continue
        b[prefix + name] = {"same": t, "half": t.half(), "clone": t.clone(), "detach": t.detach()}[edit]
    items = list(b.items())
    if order == "reversed":
        items.reverse()
    elif order == "swapped" and len(items) > 2:
        items[0], items[2] = items[2], items[0]
    elif order == "new first":
        items.insert(0, ("new0", torch.zeros(2)))
    b = dict(items)
    b["new"] = torch.zeros(3)
    _check(a, b)


class _Sub(torch.Tensor):
    """A tensor subclass read as a plain view (no dispatch of its own) but not shared."""


def test_b_table_derived_from_a_equals_its_own() -> None:
    """b's table is gathered from a's columns for the rows b copied (a wrapped state dict with
    casts, clones, new dtypes, shared storages and views): column by column what b's own rows
    give; so too when the second walk gives up looking (over a thousand new tensors in a row)."""
    a = _side_a(40, 3) | {"i": torch.zeros(3, dtype=torch.int64), "h": torch.zeros(2, dtype=torch.float16)}
    b = {"module." + k: (t.double() if k.endswith("row") else t) for k, t in a.items()} | {"extra": torch.ones(5)}
    assert _check(a, b) == 1
    sub = {"sub": torch.zeros(2).as_subclass(_Sub)}  # a row that is no read: rows found by identity
    assert _check(sub | a, {"module.sub": sub["sub"]} | b) == 1
    detached = {"d." + k: t.detach() for k, t in a.items()}
    for many, derived in ((100, 1), (1100, 0)):  # new tensors after which a's are looked up, or not
        fresh = {f"new.{i}": torch.zeros(1) for i in range(many)}
        assert _check(a, detached | fresh | a) == derived


def test_new_objects_over_storages_read_before_take_their_facts() -> None:
    """b's tensors are new objects over a's storages (a ``state_dict()``'s detached copies):
    once the walk stops looking them up by identity, each storage a read before gives its
    device, size and address (not read again), and the diff still equals the diff of the two
    analysed apart, the storage facts of a new storage (a cast) read as usual."""
    from tensorviz.sources import live

    a = _side_a(900, 5)  # over 1,024 tensors
    b = {k: (t.half() if k == "l.899.w" else t.detach()) for k, t in a.items()}  # the cast comes late
    _check(a, b)
    calls: list[int] = []
    real = live.address
    with patch.object(live, "address", lambda st: calls.append(1) or real(st)):
        d = tv.diff(a, b)
    # a's reads, b's reads up to the walk's giving up (its first miss and _GIVE_UP look-ups), the cast's storage
    assert list(a).index("l.899.w") > live._GIVE_UP + 1
    assert len(calls) == len(a) + (1 + live._GIVE_UP) + 1
    assert [(c.name, c.field) for c in d.changed] == [("l.899.w", "dtype"), ("l.899.w", "nbytes")]


def test_a_model_and_its_wrapped_self() -> None:
    model = tiny_gpt2()
    wrapped = torch.nn.ModuleDict({"module": model})
    _check(model, wrapped)
    d = tv.diff(model, wrapped)
    assert d.matched == len(d.layout_a) and not d.only_a and not d.only_b and not d.changed
    assert d.rules == (f"{len(d.layout_a)} names matched with prefix 'module.' removed from b",)


class Fresh(Mapping):
    """Every read makes a new tensor (its shape counts the reads): freed tensors' ids come back."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.reads = names, 0
        self.made: list[weakref.ref] = []

    def __getitem__(self, name: str) -> torch.Tensor:
        self.reads += 1
        t = torch.zeros(self.reads)
        self.made.append(weakref.ref(t))
        return t

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


def test_fresh_tensors_are_never_taken_for_one_another() -> None:
    names = [f"w{i}" for i in range(50)]
    a, b = Fresh(names), Fresh(names)
    b.reads = 1000  # b's tensors have other shapes than a's
    d = tv.diff(a, b)
    assert [c.name for c in d.changed if c.field == "shape"] == names
    assert dict((c.name, c.b) for c in d.changed if c.field == "shape") == {n: (1001 + i,) for i, n in enumerate(names)}
    gc.collect()
    assert not [r for r in a.made + b.made if r() is not None]  # nothing of the inputs is kept


def test_shared_reads_ends_with_its_block() -> None:
    w = torch.zeros(2)
    with shared_reads():
        assert SHARED_READS.get() is not None
        tv.analyze({"w": w})
    assert SHARED_READS.get() is None
