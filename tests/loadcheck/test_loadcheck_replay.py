"""The load check's replay of ``load_state_dict`` (tensorviz/loadcheck/replay.py) against torch's own.

The replay is torch's ``Module.load_state_dict`` with each child's share of the state dict cut in
one pass. Every case here runs both on two identical models with one source and compares all
a caller can see: raises or not and the whole message, the returned keys, the keys a post-hook
saw, the warnings, and the models afterwards (names, types, shapes, dtypes, strides,
requires_grad, ties, values, and which source tensor each name holds after ``assign=True``).
Cases: the load zoo's scenarios (tests/loadcheck/test_loadcheck.py), the model zoo on meta twins
(the path load_check takes), hand-built modules that stress what the shortcut could change
(pre-hooks renaming keys, a child named with a dot, a child registered twice, lazy modules,
custom ``_load_from_state_dict``, extra state, keys that are not strings), and generated trees
with generated sources (hypothesis).
"""

from __future__ import annotations

import collections
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import tensorviz as tv
from tensorviz.loadcheck.check import model_layout, model_twin, source_twin
from tensorviz.loadcheck.replay import load_state_dict as replay
from tensorviz.loadcheck.replay import replays
from tests.helpers import zoo
from tests.loadcheck.test_loadcheck import SCENARIOS, _real_source


def _torch(model: nn.Module, source: Any, strict: bool, assign: bool) -> Any:
    return model.load_state_dict(source, strict=strict, assign=assign)


def _replayed(model: nn.Module, source: Any, strict: bool, assign: bool) -> Any:
    return replay(model, source, strict=strict, assign=assign)


def _outcome(load: Callable, model: nn.Module, source: Any, strict: bool, assign: bool) -> tuple:
    """What one load shows: (error, returned keys, keys the post-hook saw, warnings, model)."""
    seen: dict[str, list] = {}
    model.register_load_state_dict_post_hook(
        lambda m, k: seen.update(missing=list(k.missing_keys), unexpected=list(k.unexpected_keys))
    )
    error, keys = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = load(model, source, strict, assign)
            keys = (list(out.missing_keys), list(out.unexpected_keys))
        except Exception as err:  # noqa: BLE001 -- what each raises is compared
            error = f"{type(err).__name__}: {err}"
    return error, keys, seen, [str(w.message) for w in caught], _state(model, source)


def _state(model: nn.Module, source: Any) -> tuple:
    """Each state-dict entry after the load, the ties, and (real tensors) which source tensor
    each entry now is (by address, shape and stride) or else its values."""
    sd = model.state_dict(keep_vars=True)
    srcs = {}
    if isinstance(source, collections.abc.Mapping):
        for i, t in enumerate(source.values()):
            if isinstance(t, torch.Tensor) and not t.is_meta:
                srcs.setdefault((t.data_ptr(), tuple(t.shape), t.stride()), i)
    ties = collections.defaultdict(list)
    entries = []
    for name, t in sd.items():
        if not isinstance(t, torch.Tensor):
            entries.append((name, repr(t)))
            continue
        ties[id(t)].append(name)
        real = not t.is_meta and not isinstance(t, nn.parameter.UninitializedTensorMixin)
        which = srcs.get((t.data_ptr(), tuple(t.shape), t.stride())) if real else None
        values = t.detach().clone() if real and which is None else None
        entries.append((name, type(t).__name__, tuple(t.shape), t.dtype, t.stride(), t.requires_grad, which, values))
    return entries, sorted(ties.values())


def _same(a: tuple, b: tuple) -> None:
    assert a[:4] == b[:4]
    (ea, ta), (eb, tb) = a[4], b[4]
    assert ta == tb
    assert [e[:-1] for e in ea] == [e[:-1] for e in eb]
    for x, y in zip(ea, eb):
        if len(x) > 2 and x[-1] is not None:
            assert torch.equal(x[-1], y[-1]), x[0]


def _check(make_model: Callable[[], nn.Module], source: Any, strict: bool, assign: bool) -> tuple:
    """Torch and the replay, each on its own fresh model from ``make_model``, one source."""
    real = _outcome(_torch, make_model(), source, strict, assign)
    replayed = _outcome(_replayed, make_model(), source, strict, assign)
    _same(real, replayed)
    return real


# -- the load zoo's scenarios: real models and sources ----------------------------------------------
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_zoo_scenarios_load_the_same(name: str, tmp_path) -> None:
    make_model, make_source, strict, assign = SCENARIOS[name]
    source = _real_source(make_source(str(tmp_path)))
    _same_layout(make_model())
    _check(make_model, source, strict, assign)
    for s, a in ((not strict, assign), (strict, not assign)):  # the other settings too
        _check(make_model, source, s, a)


# -- the model zoo, on meta twins (as load_check runs it) -------------------------------------------
def _variants(sd: collections.OrderedDict) -> list[tuple[str, collections.OrderedDict, bool, bool]]:
    first = next(iter(sd))
    fewer = collections.OrderedDict((k, v) for k, v in sd.items() if k != first)
    fewer["extra.weight"] = torch.empty(2, device="meta")
    prefixed = collections.OrderedDict(("module." + k, v) for k, v in sd.items())
    return [
        ("own", sd, True, False),
        ("one less, one extra", fewer, False, False),
        ("module.", prefixed, True, False),
    ] + [("assign", sd, True, True)]


def _same_layout(model: nn.Module) -> None:
    """The check's layout of ``model`` (read as a mapping) names and groups as tv.analyze(model)."""
    a, b = tv.analyze(model), model_layout(model)
    assert a.names == b.names
    for kind in ("overlap", "span"):
        assert [g.names for g in a.shared(kind)] == [g.names for g in b.shared(kind)], kind


@pytest.mark.parametrize("name", zoo.ZOO)
def test_model_zoo_twins_load_the_same(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = zoo.build(name)
    _same_layout(model)
    sd = model.state_dict()
    twin_sd = source_twin(sd, None)
    for label, source, strict, assign in _variants(twin_sd):
        real = _check(lambda: model_twin(model), source, strict, assign)
        if label == "own" and replays(model):
            assert real[0] is None and real[1] == ([], []), label


# -- hand-built modules: what the one-pass cut could get wrong --------------------------------------
class Leaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2, 2))


def _renaming() -> nn.Module:
    """A parent whose pre-hook renames a child's old key (and adds one outside its prefix)."""
    torch.manual_seed(0)
    m = nn.Module()
    m.inner = nn.Module()
    m.inner.child = Leaf()

    def hook(module, state_dict, prefix, *rest):  # noqa: ANN001, ANN202
        old = prefix + "child.old_weight"
        if old in state_dict:
            state_dict[prefix + "child.weight"] = state_dict.pop(old)
        state_dict["other.child.weight"] = torch.zeros(1)  # outside its prefix, as long as it

    m.inner.register_load_state_dict_pre_hook(hook)
    return m


def _watched(make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    """``make``'s model with a pre-hook on every module that puts the keys of the dict it was
    given, in order, into the message: each module's share becomes part of what is compared."""

    def watch(module, state_dict, prefix, local_metadata, strict, missing, unexpected, error_msgs):  # noqa: ANN001, ANN202
        error_msgs.append(f"{prefix!r} saw {list(state_dict)!r}")

    def watched() -> nn.Module:
        model = make()
        for m in model.modules():
            m.register_load_state_dict_pre_hook(watch)
        return model

    return watched


def _dotted() -> nn.Module:
    """A child named with a dot beside a child whose prefix it shares (torch's scan path)."""
    torch.manual_seed(0)
    m = nn.Module()
    m.a = nn.Module()
    m.a.b = Leaf()
    m._modules["a.b"] = Leaf()
    m.register_module("gone", None)
    return m


def _twice() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Module()
    m.x = Leaf()
    m.y = m.x
    m.h = nn.ModuleList(Leaf() for _ in range(12))  # h.1 beside h.10 and h.11
    return m


def _mixed() -> nn.Module:
    m = _twice()
    m.d = _dotted()
    return m


class Extra(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(2))
        self.state = 0

    def get_extra_state(self) -> Any:
        return {"state": self.state}

    def set_extra_state(self, state: Any) -> None:
        self.state = state["state"]


class OldNames(nn.Module):
    """A ``_load_from_state_dict`` of its own, renaming an old key before torch's."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.extra = Extra()

    def _load_from_state_dict(self, state_dict, prefix, *args):  # noqa: ANN001, ANN202
        if prefix + "w" in state_dict:
            state_dict[prefix + "lin.weight"] = state_dict.pop(prefix + "w")
        super()._load_from_state_dict(state_dict, prefix, *args)


def _old_names() -> nn.Module:
    torch.manual_seed(0)
    return OldNames()


def _lazy() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.LazyLinear(3), nn.ReLU(), nn.Linear(3, 2))


def _forgiving() -> nn.Module:
    """A post-hook that clears the missing keys (torch's message must follow)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    m[0].register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
    return m


def _viewing_buffers() -> nn.Module:
    """A transient buffer viewing a weight, a persistent one viewing another: both in the
    layout's groups (the transient one only through named_buffers)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    m[0].register_buffer("row", m[0].weight.detach()[0], persistent=False)
    m[1].register_buffer("col", m[1].weight.detach()[:, 0])
    return m


def _meta() -> nn.Module:
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))


def _sd(pairs: dict[str, Any]) -> collections.OrderedDict:
    torch.manual_seed(7)
    return collections.OrderedDict((k, torch.randn(*v) if isinstance(v, tuple) else v) for k, v in pairs.items())


HAND: dict[str, tuple[Callable[[], nn.Module], Callable[[], Any]]] = {
    "pre-hook renames a child's key": (_renaming, lambda: _sd({"inner.child.old_weight": (2, 2)})),
    "pre-hook, new key present": (_renaming, lambda: _sd({"inner.child.weight": (2, 2), "inner.zz": (1,)})),
    "every share watched, pre-hook renames": (
        _watched(_renaming),
        lambda: _sd({"inner.child.old_weight": (2, 2), "inner.child.weight": (2, 2), "inner.x": (1,)}),
    ),
    "every share watched, a dot, a child twice": (
        _watched(_mixed),
        lambda: _sd({"d.a.b.weight": (2, 2), "x.weight": (2, 2), "h.1.weight": (2, 2), "h.10.weight": (2, 2)}),
    ),
    "child named with a dot": (_dotted, lambda: _sd({"a.b.weight": (2, 2), "gone.weight": (2,)})),
    "child named with a dot, all keys": (
        _dotted,
        lambda: _sd({"a.b.weight": (2, 2), "a.b.weight ": (2, 2), "ab.weight": (2, 2)}),
    ),
    "a child under two names, h.1 and h.10": (
        _twice,
        lambda: _sd({"x.weight": (2, 2), "y.weight": (2, 2), "h.1.weight": (2, 2), "h.10.weight": (3, 2)}),
    ),
    "h.1. is not h.10.": (_twice, lambda: _sd({f"h.{i}.weight": (2, 2) for i in range(12)} | {"h.1": (2,)})),
    "own _load_from_state_dict, extra state": (
        _old_names,
        lambda: _sd({"w": (2, 2), "lin.bias": (2,), "extra.weight": (2,), "extra._extra_state": {"state": 5}}),
    ),
    "extra state missing": (_old_names, lambda: _sd({"lin.weight": (2, 2), "lin.bias": (2,), "extra.weight": (2,)})),
    "lazy module materialised": (_lazy, lambda: _sd({"0.weight": (3, 4), "0.bias": (3,), "2.weight": (2, 3)})),
    "post-hook clears missing keys": (_forgiving, lambda: _sd({"1.weight": (2, 2), "1.bias": (2,)})),
    "buffers viewing weights": (
        _viewing_buffers,
        lambda: _sd({"0.weight": (2, 2), "0.bias": (2,), "1.weight": (2, 2), "1.bias": (2,), "1.col": (2,)}),
    ),
    "meta model, real source (a warning)": (
        _meta,
        lambda: _sd({"0.weight": (2, 2), "0.bias": (2,), "1.weight": (2,), "1.running_mean": (2,)}),
    ),
    "a key that is not a str": (
        _twice,
        lambda: collections.OrderedDict([(1, torch.zeros(2)), ("x.weight", torch.zeros(2, 2))]),
    ),
    "not a mapping": (_twice, lambda: [("x.weight", torch.zeros(2, 2))]),
}


@pytest.mark.parametrize("name", list(HAND))
@pytest.mark.parametrize("strict,assign", [(True, False), (False, False), (True, True), (False, True)])
def test_hand_built_modules_load_the_same(name: str, strict: bool, assign: bool) -> None:
    make_model, make_source = HAND[name]
    _check(make_model, make_source(), strict, assign)
    _same_layout(make_model())


def test_hand_built_cases_are_not_vacuous() -> None:
    """The cases reach what they are about: a renamed key loads, the dotted child gets its key by
    torch's scan, h.10's wrong shape is reported under its own name, extra state is set."""
    model, source = _renaming(), HAND["pre-hook renames a child's key"][1]()
    assert replay(model, source, strict=True) == ([], [])  # the child saw the renamed key
    assert torch.equal(model.inner.child.weight, source["inner.child.old_weight"])
    err, *_ = _check(_twice, HAND["a child under two names, h.1 and h.10"][1](), False, False)
    assert err is not None and err.count("size mismatch") == 1 and "h.10.weight" in err
    model = _old_names()
    replay(model, HAND["own _load_from_state_dict, extra state"][1](), strict=True)
    assert model.extra.state == 5
    model = _dotted()
    replay(model, _sd({"a.b.weight": (2, 2)}), strict=True)
    assert torch.equal(model._modules["a.b"].weight, model.a.b.weight)
    err, *_ = _check(_forgiving, HAND["post-hook clears missing keys"][1](), True, False)
    assert err is None
    groups = [g.names for g in model_layout(_viewing_buffers()).shared("overlap")]
    assert ("0.weight", "0.row") in groups and ("1.weight", "1.col") in groups


def test_post_hook_returning_a_value_raises_the_same() -> None:
    def make() -> nn.Module:
        m = _twice()
        m.register_load_state_dict_post_hook(lambda mod, keys: keys)
        return m

    err, *_ = _check(make, _twice().state_dict(), True, False)
    assert err is not None and err.startswith("AssertionError: Hooks registered")


def test_replays_only_torch_own_load_state_dict() -> None:
    class Own(nn.Module):
        def load_state_dict(self, state_dict, strict=True, assign=False):  # noqa: ANN001, ANN201
            return super().load_state_dict(state_dict, strict=False, assign=assign)

    assert replays(nn.Linear(2, 2)) and replays(_twice())
    assert not replays(Own())
    patched = nn.Linear(2, 2)
    patched.load_state_dict = lambda sd, strict=True, assign=False: None  # type: ignore[method-assign]
    assert not replays(patched) and not replays(model_twin(patched))


def test_load_check_follows_a_load_state_dict_of_its_own() -> None:
    """Where the model's class has its own ``load_state_dict``, the check runs that one (here one
    that drops ``module.`` and loads non-strictly), and predicts what it does."""

    class Own(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def load_state_dict(self, state_dict, strict=True, assign=False):  # noqa: ANN001, ANN201
            state_dict = {k.removeprefix("module."): v for k, v in state_dict.items()}
            return super().load_state_dict(state_dict, strict=False, assign=assign)

    source = {"module.lin.weight": torch.zeros(2, 2), "extra": torch.zeros(1)}
    r = tv.load_check(Own(), source, strict=True)
    model = Own()
    real = model.load_state_dict(source, strict=True)
    assert (r.raises, list(r.missing), list(r.unexpected)) == (False, real.missing_keys, real.unexpected_keys)
    assert (r.missing, r.unexpected) == (("lin.bias",), ("extra",))


# -- generated trees and sources ---------------------------------------------------------------------
NAMES = st.sampled_from(["0", "1", "10", "a", "ab", "a_b"])
LEAVES = st.sampled_from(["linear", "emb", "bn", "ln", "scalar", "buffer", "transient", "none"])
TREES = st.recursive(LEAVES, lambda kids: st.dictionaries(NAMES, kids, min_size=1, max_size=3), max_leaves=8)


class Holder(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        if kind == "scalar":
            self.p = nn.Parameter(torch.randn(()))
        else:
            self.register_buffer("b", torch.randn(2, 2), persistent=kind == "buffer")


def _leaf(kind: str) -> nn.Module:
    makers = {"linear": lambda: nn.Linear(2, 2), "emb": lambda: nn.Embedding(2, 2), "bn": lambda: nn.BatchNorm1d(2)}
    return makers.get(kind, lambda: nn.LayerNorm(2) if kind == "ln" else Holder(kind))()


def _tree(spec: Any) -> nn.Module:
    if isinstance(spec, str):
        return _leaf(spec)
    m = nn.Module()
    for name, child in spec.items():
        m.register_module(name, None if child == "none" else _tree(child))
    return m


def _built(spec: Any, tie: bool) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        torch.manual_seed(0)
        m = _tree({"root": spec})
        squares = [
            (mod, n) for mod in m.modules() for n, p in mod._parameters.items() if p is not None and p.dim() == 2
        ]
        if tie and len(squares) >= 2:
            setattr(squares[1][0], squares[1][1], getattr(squares[0][0], squares[0][1]))
        return m

    return make


ACTIONS = st.sampled_from(["keep", "keep", "keep", "drop", "reshape", "double", "list", "prefix"])


@st.composite
def cases(draw: Any) -> tuple:
    make = _built(draw(TREES), draw(st.booleans()))
    keys = list(make().state_dict())
    torch.manual_seed(draw(st.integers(0, 9)))
    pairs = []
    for key, action in zip(keys, draw(st.lists(ACTIONS, min_size=len(keys), max_size=len(keys)))):
        t = make().state_dict()[key]
        value = torch.randn_like(t.float()).to(t.dtype)
        if action == "reshape":
            value = torch.randn(1) if t.dim() == 0 else torch.randn(*t.shape, 1)
        pairs += [] if action == "drop" else [(("module." if action == "prefix" else "") + key, value)]
        if action == "double":
            pairs[-1] = (key, value.double())
        if action == "list":
            pairs[-1] = (key, [1.0])
    extras = draw(st.lists(st.sampled_from(keys or ["x"]), max_size=2))
    pairs += [(k.rsplit(".", 1)[0] + ".extra", torch.zeros(1)) for k in extras]
    order = draw(st.permutations(range(len(pairs))))
    source = collections.OrderedDict(pairs[i] for i in order)
    if draw(st.booleans()):
        source._metadata = make().state_dict()._metadata  # type: ignore[attr-defined]
    return make, source, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_generated_trees_load_the_same(case: tuple) -> None:
    make, source, strict, assign = case
    _check(make, source, strict, assign)
    _same_layout(make())
    twin_source = source_twin(source, None)
    _check(lambda: model_twin(make()), twin_source, strict, assign)
