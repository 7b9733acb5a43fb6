"""tv.diff: table-driven cases with exact expected sets, and real saves and loads.

Each case builds side a and side b (live objects, files written to a temporary folder) and
states the whole expected answer: names on one side, renames and the rule used, every changed
(name, field, a, b), ties and sharing lost and gained, moved files. Anything not stated must be
empty, so a spurious change fails the case as surely as a missed one.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import tensorviz as tv
from tensorviz.core.diff import Change, diff_layouts, match_names
from tests.helpers.models import TiedLM, tiny_gpt2

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

F = frozenset


def _w(seed: int = 0, *shape: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randn(*(shape or (4, 6)))


def _tied() -> dict[str, torch.Tensor]:
    w = _w(1)
    return {"emb": w, "head": w, "b": _w(2, 3)}


def _interleaved() -> dict[str, torch.Tensor]:
    x = _w(3, 12)
    return {"even": x[::2], "odd": x[1::2]}


def _torch_roundtrip(obj: Any, folder: str) -> Any:
    path = os.path.join(folder, "sd.pt")
    torch.save(obj, path)
    return torch.load(path, weights_only=True)


def _safetensors_file(obj: dict, folder: str) -> str:
    from safetensors.torch import save_file

    path = os.path.join(folder, "sd.safetensors")
    save_file({k: v.clone().contiguous() for k, v in obj.items()}, path)
    return path


def _save_model(model: nn.Module, folder: str) -> str:
    from safetensors.torch import save_model

    path = os.path.join(folder, "model.safetensors")
    save_model(model, path)
    return path


def _load_model(model: nn.Module, folder: str) -> nn.Module:
    from safetensors.torch import load_model

    fresh = TiedLM()
    load_model(fresh, _save_model(model, folder))
    return fresh


def _pretrained(model: Any, folder: str) -> Any:
    model.save_pretrained(folder)
    return type(model).from_pretrained(folder)


def _pretrained_sharded(model: Any, folder: str) -> tuple[str, str]:
    model.save_pretrained(os.path.join(folder, "one"))
    model.save_pretrained(os.path.join(folder, "sharded"), max_shard_size="5KB")
    return os.path.join(folder, "one"), os.path.join(folder, "sharded")


def _dcp(model: nn.Module, folder: str) -> str:
    import torch.distributed.checkpoint as dcp

    path = os.path.join(folder, "dcp")
    dcp.save(model.state_dict(), checkpoint_id=path)
    return path


def _changes(*items: tuple) -> set[tuple]:
    return set(items)


#: name -> (build(folder) -> (a, b), expected). Expected keys: only_a, only_b, renamed, rules,
#: changed {(name, field, a, b)}, ties_lost, ties_gained, sharing_lost, sharing_gained, moved
#: {(name, file_a, file_b)}; anything absent is expected empty.
CASES: dict[str, tuple[Callable[[str], tuple[Any, Any]], dict[str, Any]]] = {
    "identical objects": (lambda f: (_tied(), _tied()), {}),
    "module. prefix": (
        lambda f: ({"w": _w(), "b": _w(1, 3)}, {"module.w": _w(), "module.b": _w(1, 3)}),
        {
            "renamed": {("w", "module.w"), ("b", "module.b")},
            "rules": ["2 names matched with prefix 'module.' removed from b"],
        },
    ),
    "_orig_mod. and model. prefixes, exact first": (
        lambda f: (
            {"_orig_mod.model.x": _w(), "y": _w(), "model.y": _w()},
            {"x": _w(), "y": _w(), "z": _w()},
        ),
        {
            "renamed": {("_orig_mod.model.x", "x")},
            "rules": ["1 name matched with prefix '_orig_mod.model.' removed from a"],
            "only_a": ["model.y"],
            "only_b": ["z"],
        },
    ),
    "peft base_model.model.": (
        lambda f: ({"base_model.model.lm.w": _w()}, {"lm.w": _w()}),
        {
            "renamed": {("base_model.model.lm.w", "lm.w")},
            "rules": ["1 name matched with prefix 'base_model.model.' removed from a"],
        },
    ),
    "ambiguous reduced names stay unmatched": (
        lambda f: ({"module.w": _w(), "model.w": _w()}, {"w": _w()}),
        {"only_a": ["module.w", "model.w"], "only_b": ["w"]},
    ),
    "shape": (
        lambda f: ({"w": _w()}, {"w": _w(0, 4, 7)}),
        {"changed": _changes(("w", "shape", (4, 6), (4, 7)), ("w", "nbytes", 96, 112))},
    ),
    "dtype": (
        lambda f: ({"w": _w()}, {"w": _w().double()}),
        {"changed": _changes(("w", "dtype", "float32", "float64"), ("w", "nbytes", 96, 192))},
    ),
    "stride (transposed storage, same shape)": (
        lambda f: ({"w": _w()}, {"w": _w(0, 6, 4).t()}),
        {"changed": _changes(("w", "stride", (6, 1), (1, 4)))},
    ),
    "offset": (
        lambda f: ({"w": _w(0, 10)[:4]}, {"w": _w(0, 10)[2:6]}),
        {"changed": _changes(("w", "offset", 0, 2))},
    ),
    "device: meta vs CPU twins": (
        lambda f: (TiedLM(), TiedLM(device="meta")),
        {
            "changed": _changes(
                ("wte.weight", "device", "cpu", "meta"),
                ("ln.weight", "device", "cpu", "meta"),
                ("ln.bias", "device", "cpu", "meta"),
                ("lm_head.weight", "device", "cpu", "meta"),
            )
        },
    ),
    "tie lost in a clone": (
        lambda f: (_tied(), {k: v.clone() for k, v in _tied().items()}),
        {"ties_lost": [F({"emb", "head"})], "sharing_lost": [F({"emb", "head"})]},
    ),
    "tie gained": (
        lambda f: ({k: v.clone() for k, v in _tied().items()}, _tied()),
        {"ties_gained": [F({"emb", "head"})], "sharing_gained": [F({"emb", "head"})]},
    ),
    "tie whose name is gone": (
        lambda f: (_tied(), {"emb": _w(1), "b": _w(2, 3)}),
        {"only_a": ["head"], "ties_lost": [F({"emb", "head"})], "sharing_lost": [F({"emb", "head"})]},
    ),
    "transposed tie is a span tie": (
        lambda f: ((lambda w: {"w": w, "wt": w.t()})(_w()), {"w": _w(), "wt": _w().t()}),
        {"ties_lost": [F({"w", "wt"})], "sharing_lost": [F({"w", "wt"})]},
    ),
    "interleaved views are not a tie": (
        lambda f: (_interleaved(), {"even": _w(3, 6), "odd": _w(3, 6)}),
        {"changed": _changes(("even", "stride", (2,), (1,)), ("odd", "stride", (2,), (1,)), ("odd", "offset", 1, 0))},
    ),
    "overlapping slices: sharing, no tie": (
        lambda f: ((lambda x: {"a": x[:8], "b": x[4:]})(_w(0, 12)), {"a": _w(0, 8), "b": _w(0, 8)}),
        {"sharing_lost": [F({"a", "b"})], "changed": _changes(("b", "offset", 4, 0))},
    ),
    "torch.save keeps a tie": (lambda f: (_tied(), _torch_roundtrip(_tied(), f)), {}),
    "safetensors save_file of clones loses it": (
        lambda f: (_tied(), _safetensors_file(_tied(), f)),
        {"ties_lost": [F({"emb", "head"})], "sharing_lost": [F({"emb", "head"})]},
    ),
    "safetensors save_model keeps one name": (
        lambda f: (TiedLM(), _save_model(TiedLM(), f)),
        {
            "only_a": ["wte.weight"],
            "ties_lost": [F({"wte.weight", "lm_head.weight"})],
            "sharing_lost": [F({"wte.weight", "lm_head.weight"})],
        },
    ),
    "safetensors load_model re-ties": (lambda f: (TiedLM(), _load_model(TiedLM(), f)), {}),
    "save_pretrained / from_pretrained re-ties": (lambda f: (tiny_gpt2(), _pretrained(tiny_gpt2(), f)), {}),
    "sharded vs unsharded save_pretrained": (
        lambda f: _pretrained_sharded(tiny_gpt2(), f),
        {"moved": "every tensor"},
    ),
    "DCP folder vs the live model that saved it": (
        lambda f: (tiny_gpt2(), _dcp(tiny_gpt2(), f)),
        {
            "ties_lost": [F({"transformer.wte.weight", "lm_head.weight"})],
            "sharing_lost": [F({"transformer.wte.weight", "lm_head.weight"})],
        },
    ),
}


def _sharded_moves(a: str, b: str) -> set[tuple[str, str, str]]:
    """Brute force: which file each tensor is in, from the safetensors headers themselves."""
    import json

    from safetensors import safe_open

    def where(folder: str) -> dict[str, str]:
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                return dict(json.load(f)["weight_map"])
        with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
            return {k: "model.safetensors" for k in f.keys()}  # noqa: SIM118

    wa, wb = where(a), where(b)
    return {(n, wa[n], wb[n]) for n in wa if wa[n] != wb[n]}


@pytest.mark.parametrize("case", list(CASES))
def test_diff_cases(case: str, tmp_path) -> None:
    build, want = CASES[case]
    a, b = build(str(tmp_path))
    d = tv.diff(a, b)
    assert set(d.only_a) == set(want.get("only_a", ()))
    assert set(d.only_b) == set(want.get("only_b", ()))
    assert set(d.renamed) == set(want.get("renamed", ()))
    assert list(d.rules) == want.get("rules", [])
    assert {(c.name, c.field, c.a, c.b) for c in d.changed} == want.get("changed", set())
    for key in ("ties_lost", "ties_gained", "sharing_lost", "sharing_gained"):
        assert sorted(map(sorted, getattr(d, key))) == sorted(map(sorted, want.get(key, []))), key
    moved = {(m.name, m.file_a, m.file_b) for m in d.moved}
    if want.get("moved") == "every tensor":
        expected = _sharded_moves(a, b)
        assert len(expected) == len(tv.analyze(a)) > 0
        assert moved == expected
    else:
        assert moved == set()
    assert d.same == (not want), want
    assert ("same" if d.same else "differ") == str(d).splitlines()[-1]


def test_changes_are_listed_in_a_order_then_field_order() -> None:
    a = collections.OrderedDict(x=_w(), y=_w(0, 3))
    b = collections.OrderedDict(y=_w(0, 3).half(), x=_w(0, 5).double())
    d = tv.diff(a, b)
    assert d.changed == (
        Change("x", "shape", (4, 6), (5,)),
        Change("x", "dtype", "float32", "float64"),
        Change("x", "nbytes", 96, 40),
        Change("y", "dtype", "float32", "float16"),
        Change("y", "nbytes", 12, 6),
    )


def test_a_conjugate_view_against_its_values_is_a_changed_field(tmp_path) -> None:
    """z.conj() reads z's bytes and conjugates them: against a plain tensor of the same
    values the metadata differs in the field "conjugate" only, either way round. Against the
    file save_file writes of it too: the file holds the raw bytes (z's), which content=True
    finds different from z.conj()'s values."""
    from safetensors.torch import save_file

    z = torch.complex(torch.arange(4.0), torch.arange(4.0) + 1)
    live = {"c": z.conj(), "plain": z.clone()}
    d = tv.diff(live, {"c": z.conj().resolve_conj(), "plain": z.clone()})
    assert d.changed == (Change("c", "conjugate", True, False),)
    assert "  c  a conjugate view in a, plain in b" in str(d).splitlines()
    assert d.to_json()["changed"] == [{"name": "c", "field": "conjugate", "a": True, "b": False}]
    back = tv.diff({"c": z.clone()}, {"c": z.clone().conj()})
    assert back.changed == (Change("c", "conjugate", False, True),)
    assert "  c  plain in a, a conjugate view in b" in str(back).splitlines()
    path = str(tmp_path / "c.safetensors")
    save_file({"c": live["c"]}, path)  # safetensors writes the storage's bytes: z, not z.conj()
    saved = tv.diff({"c": live["c"]}, path, content=True)
    assert saved.changed == (Change("c", "conjugate", True, False),) and saved.content.different == ("c",)


def test_match_names_prefers_exact_names() -> None:
    pos, renamed, rules = match_names(["w", "module.w", "module.v"], ["w", "v"])
    assert pos.tolist() == [0, -1, 1]
    assert renamed == [("module.v", "v")]
    assert rules == ["1 name matched with prefix 'module.' removed from a"]


def test_two_layouts_and_the_layouts_are_unchanged() -> None:
    la, lb = tv.analyze(_tied()), tv.analyze({"emb": _w(1), "head": _w(1), "b": _w(2, 3)})
    before = (la.names, lb.names, la.shared("span"), lb.shared("span"))
    d = diff_layouts(la, lb)
    assert d.ties_lost == (F({"emb", "head"}),)
    assert d.layout_a is la and d.layout_b is lb
    assert before == (la.names, lb.names, la.shared("span"), lb.shared("span"))


def test_dtype_totals_count_a_tie_once() -> None:
    d = tv.diff(_tied(), {"emb": _w(1).half(), "head": _w(1).half(), "b": _w(2, 3)})
    assert [(t.dtype, t.ntensors, t.nbytes) for t in d.dtypes_a] == [("float32", 3, 96 + 12)]
    assert [(t.dtype, t.ntensors, t.nbytes) for t in d.dtypes_b] == [("float16", 2, 96), ("float32", 1, 12)]


def test_modules_count_bytes_once_as_the_tree_does() -> None:
    w = _w(0, 10, 4)
    a = {"emb.weight": w, "head.weight": w, "norm.weight": _w(0, 4)}
    b = {"emb.weight": w.clone(), "head.weight": w.clone(), "norm.weight": _w(0, 4).half()}
    d = tv.diff(a, b)
    got = {m.path: (m.a, m.b) for m in d.modules(depth=None)}
    assert got == {"head": (0, 160), "head.weight": (0, 160), "norm": (16, 8), "norm.weight": (16, 8)}
    tree_a, tree_b = tv.analyze(a).tree(), tv.analyze(b).tree()
    for path, (na, nb) in got.items():
        assert (tree_a.find(path).nbytes, tree_b.find(path).nbytes) == (na, nb)


@pytest.mark.parametrize(
    "module",
    [
        "tensorviz.core.diff",
        "tensorviz.core.diff_match",
        "tensorviz.core.diff_modules",
        "tensorviz.core.diff_text",
        "tensorviz.render.diff",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_public_diff_docstring_example_runs() -> None:
    import doctest

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(tv.diff, "diff", globs={}):
        runner.run(test)
    assert runner.summarize(verbose=False) == doctest.TestResults(0, 4)


def test_renamed_pairs_made_on_first_read_equal_the_matchers() -> None:
    """``renamed`` is made when first read (no 100k pairs for the collector to walk after the
    diff), then kept; ``dataclasses.replace`` (as content=True does) carries it over."""
    import dataclasses

    a = {f"l.{i}.w": _w(i, 2) for i in range(5)} | {"kept": _w(9, 2)}
    b = {"kept": a["kept"]} | {"module." + n: t for n, t in list(a.items())[:5]}
    d = tv.diff(a, b)
    _, pairs, _ = match_names(d.layout_a.names, d.layout_b.names)
    first = d.renamed
    assert first == tuple(pairs) == tuple((f"l.{i}.w", f"module.l.{i}.w") for i in range(5))
    assert d.renamed is first and type(first[0]) is tuple
    assert dataclasses.replace(d, content=None).renamed == first
    assert tv.diff(a, a).renamed == () and "renamed" in [f.name for f in dataclasses.fields(d)]
