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

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorviz as tv
from tensorviz.core.diff import LayoutDiff, diff_layouts
from tensorviz.sources.shared import SHARED_READS, shared_reads
from tests.helpers.models import tiny_gpt2


def _fields(d: LayoutDiff) -> dict:
    return {f.name: getattr(d, f.name) for f in dataclasses.fields(d) if f.name not in ("layout_a", "layout_b")}


def _check(a, b) -> None:
    alone = diff_layouts(tv.analyze(a), tv.analyze(b))
    shared = tv.diff(a, b)
    assert _fields(shared) == _fields(alone)
    assert shared.modules(depth=None) == alone.modules(depth=None)
    assert shared.layout_b.views == alone.layout_b.views
    assert SHARED_READS.get() is None


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
)
def test_shared_reads_change_no_answer(n: int, seed: int, edits: list[str], prefix: str) -> None:
    a = _side_a(n, seed)
    b: dict[str, torch.Tensor] = {}
    for (name, t), edit in zip(a.items(), edits):
        if edit == "drop":
            continue
        b[prefix + name] = {"same": t, "half": t.half(), "clone": t.clone(), "detach": t.detach()}[edit]
    b["new"] = torch.zeros(3)
    _check(a, b)


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
