"""tv.load_check for load_state_dict: each scenario predicted, then really loaded.

For every scenario the prediction is made on the very model and source that are then loaded,
and must equal reality: raises or not and torch's whole message, missing and unexpected keys
(torch's own lists, read by a post-hook on the real model), shape mismatches (the message's
"size mismatch for" lines), casts (the loaded values equal the source cast to the model's dtype),
conflicts (the winner's source is what every name of the shared bytes holds after the load, and
the losers' sources differ from it), untouched tensors (equal to their values before the load,
every other loaded name equal to its source) and, with assign=True, ties broken (the names no
longer share an address). The check itself changes nothing (parameters compared with ``is``
and by value before and after).
"""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers.models import TiedLM

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


class Untied(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.ln = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)


class Fused(nn.Module):
    """Two persistent buffers over one storage: a fused qkv and its q rows."""

    def __init__(self):
        super().__init__()
        qkv = torch.randn(12, 4)
        self.register_buffer("qkv", qkv)
        self.register_buffer("q", qkv[:4])


class Norms(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.bn.num_batches_tracked.fill_(5)  # trained: an old checkpoint must not reset it
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.fc = nn.Linear(4, 4)


def _sd(model: nn.Module, **changes: Any) -> collections.OrderedDict:
    """A fresh, independent state dict of ``model`` (new random values), with ``changes``
    (None deletes a key)."""
    torch.manual_seed(123)
    out = collections.OrderedDict((k, torch.randn_like(v.float()).to(v.dtype)) for k, v in model.state_dict().items())
    for k, v in changes.items():
        k = k.replace("__", ".")
        if v is None:
            out.pop(k)
        else:
            out[k] = v
    return out


def _seeded(cls: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return cls()


def _tied_source() -> collections.OrderedDict:
    sd = _sd(Untied())
    sd["lm_head.weight"] = sd["wte.weight"]  # one tensor under both names
    return sd


def _prefixed(prefix: str) -> Callable[[], collections.OrderedDict]:
    return lambda: collections.OrderedDict((prefix + k, v) for k, v in _sd(TiedLM()).items())


def _safetensors(tmp: str) -> str:
    from safetensors.torch import save_file

    path = os.path.join(tmp, "m.safetensors")
    sd = _sd(Untied())
    save_file({k: v.contiguous() for k, v in sd.items()}, path)
    return path


def _with_metadata_removed(model: nn.Module) -> collections.OrderedDict:
    sd = _sd(model)
    sd.pop("bn.num_batches_tracked")
    return sd  # no _metadata: torch's BatchNorm treats it as an old checkpoint


def _with_metadata(model: nn.Module) -> collections.OrderedDict:
    sd = _sd(model)
    sd.pop("bn.num_batches_tracked")
    sd._metadata = model.state_dict()._metadata  # type: ignore[attr-defined]
    return sd


#: name -> (model factory, source factory (tmp folder) -> source, strict, assign)
SCENARIOS: dict[str, tuple[Callable[[], nn.Module], Callable[[str], Any], bool, bool]] = {
    "clean": (lambda: _seeded(Untied), lambda t: _sd(Untied()), True, False),
    "tied model <- untied checkpoint": (lambda: _seeded(TiedLM), lambda t: _sd(TiedLM()), True, False),
    "tied model <- tied checkpoint": (lambda: _seeded(TiedLM), lambda t: _tied_source(), True, False),
    "untied model <- tied checkpoint, one key": (
        lambda: _seeded(Untied),
        lambda t: _sd(Untied(), lm_head__weight=None),
        True,
        False,
    ),
    "untied model <- one key, strict=False": (
        lambda: _seeded(Untied),
        lambda t: _sd(Untied(), lm_head__weight=None),
        False,
        False,
    ),
    "tied model <- one key, strict=False": (
        lambda: _seeded(TiedLM),
        lambda t: _sd(TiedLM(), lm_head__weight=None),
        False,
        False,
    ),
    "module. prefix": (lambda: _seeded(TiedLM), lambda t: _prefixed("module.")(), True, False),
    "_orig_mod. prefix, strict=False": (lambda: _seeded(TiedLM), lambda t: _prefixed("_orig_mod.")(), False, False),
    "resized vocabulary, strict=False": (
        lambda: _seeded(Untied),
        lambda t: _sd(Untied(), wte__weight=torch.randn(60, 16)),
        False,
        False,
    ),
    "fp64 checkpoint into fp32 model": (lambda: _seeded(Untied), lambda t: _sd(Untied().double()), True, False),
    "fp32 checkpoint into bf16 model": (lambda: _seeded(Untied).bfloat16(), lambda t: _sd(Untied()), True, False),
    "float checkpoint into an int buffer": (
        lambda: _seeded(Norms),
        lambda t: _sd(Norms(), bn__num_batches_tracked=torch.tensor(3.7)),
        True,
        False,
    ),
    "unexpected extra key": (lambda: _seeded(Untied), lambda t: _sd(Untied(), extra__w=torch.zeros(2)), True, False),
    "strict=False leaves a layer untouched": (
        lambda: _seeded(Untied),
        lambda t: _sd(Untied(), ln__weight=None, ln__bias=None),
        False,
        False,
    ),
    "views of one buffer fed twice": (lambda: _seeded(Fused), lambda t: _sd(Fused()), True, False),
    "assign=True breaks a tie": (lambda: _seeded(TiedLM), lambda t: _sd(TiedLM()), True, True),
    "assign=True keeps a tie fed one tensor": (lambda: _seeded(TiedLM), lambda t: _tied_source(), True, True),
    "assign=True, strict=False, one key": (
        lambda: _seeded(TiedLM),
        lambda t: _sd(TiedLM(), lm_head__weight=None),
        False,
        True,
    ),
    "old BatchNorm checkpoint (no _metadata)": (
        lambda: _seeded(Norms),
        lambda t: _with_metadata_removed(Norms()),
        True,
        False,
    ),
    "BatchNorm checkpoint with _metadata": (lambda: _seeded(Norms), lambda t: _with_metadata(Norms()), True, False),
    "0-dim parameter <- shape (1,)": (
        lambda: _seeded(Norms),
        lambda t: _sd(Norms(), scale=torch.tensor([3.0])),
        True,
        False,
    ),
    "a value that is not a tensor": (
        lambda: _seeded(Untied),
        lambda t: _sd(Untied(), ln__bias=[1.0] * 16),
        True,
        False,
    ),
    "safetensors file, header-only": (lambda: _seeded(Untied), _safetensors, True, False),
    "safetensors file into a tied model": (lambda: _seeded(TiedLM), _safetensors, True, False),
}


def _real_source(source: Any) -> Any:
    if isinstance(source, str):
        from safetensors.torch import load_file

        return load_file(source)
    return source


def _really_load(model: nn.Module, source: Any, strict: bool, assign: bool) -> tuple[list, list, str | None]:
    seen: dict[str, list] = {}
    model.register_load_state_dict_post_hook(
        lambda m, keys: seen.update(missing=list(keys.missing_keys), unexpected=list(keys.unexpected_keys))
    )
    try:
        model.load_state_dict(_real_source(source), strict=strict, assign=assign)
    except Exception as err:  # noqa: BLE001
        return seen["missing"], seen["unexpected"], f"{type(err).__name__}: {err}"
    return seen["missing"], seen["unexpected"], None


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prediction_equals_the_real_load(name: str, tmp_path) -> None:
    make_model, make_source, strict, assign = SCENARIOS[name]
    model, source = make_model(), make_source(str(tmp_path))
    objects = {k: v for k, v in model.state_dict(keep_vars=True).items()}
    values = {k: v.detach().clone() for k, v in objects.items()}
    r = tv.load_check(model, source, strict=strict, assign=assign)
    after_check = model.state_dict(keep_vars=True)
    assert all(after_check[k] is objects[k] and torch.equal(after_check[k], values[k]) for k in objects)  # unchanged

    missing, unexpected, error = _really_load(model, source, strict, assign)
    assert (r.raises, r.error) == (error is not None, error)
    assert (list(r.missing), list(r.unexpected)) == (missing, unexpected)
    sizes = re.findall(r"size mismatch for (\S+): copying a param with shape torch.Size\((\[.*?\])\)", error or "")
    assert [(n, list(s)) for n, _, s in r.mismatched] == [(n, eval(s)) for n, s in sizes]

    src = _real_source(source)
    loaded = model.state_dict(keep_vars=True)
    losers = {n for c in r.conflicts for n in c.names if n != c.winner}
    fed = [
        n for n in objects if n in src and isinstance(src[n], torch.Tensor) and n not in {m for m, _, _ in r.mismatched}
    ]
    for n in r.untouched:
        assert torch.equal(loaded[n], values[n]), n
    for n in fed:
        want = src[n].reshape(loaded[n].shape) if loaded[n].dim() == 0 else src[n]
        if n not in losers:
            assert torch.equal(loaded[n].detach(), want.to(loaded[n].dtype)), n
    for c in r.conflicts:
        win = src[c.winner]
        for n in c.names:
            if n != c.winner:
                assert not torch.equal(src[n], win)  # a real conflict: different values were fed
        assert torch.equal(loaded[c.winner].detach(), win.to(loaded[c.winner].dtype))
    assert (
        {n for n, _, _ in r.cast} == {n for n in fed if src[n].dtype != loaded[n].dtype} if not assign else r.cast == ()
    )
    for n, s, m in r.cast:
        assert (str(src[n].dtype), str(loaded[n].dtype)) == ("torch." + s, "torch." + m)
    if assign:
        ptr = {n: loaded[n].data_ptr() for n in loaded}
        for group in tv.analyze(make_model()).shared("span"):
            shares = len({ptr[n] for n in group.names}) == 1
            assert shares == (frozenset(group.names) not in r.ties_broken), group.names


#: What a report says, each non-empty in some scenario.
FACTS = ("raises", "missing", "unexpected", "mismatched", "cast", "narrowing", "conflicts", "untouched", "ties_broken")


def test_scenarios_cover_each_kind_of_fact(tmp_path) -> None:
    """The table is not vacuous: each fact is non-empty in some scenario."""
    seen: dict[str, set[str]] = collections.defaultdict(set)
    for name, (make_model, make_source, strict, assign) in SCENARIOS.items():
        r = tv.load_check(make_model(), make_source(str(tmp_path)), strict=strict, assign=assign)
        for fact in FACTS:
            if getattr(r, fact):
                seen[fact].add(name)
        if r.clean:
            seen["clean"].add(name)
    assert set(seen) == {*FACTS, "clean"}
    assert (
        "tied model <- untied checkpoint" in seen["conflicts"] and "views of one buffer fed twice" in seen["conflicts"]
    )
    assert (
        "fp32 checkpoint into bf16 model" in seen["narrowing"]
        and "fp64 checkpoint into fp32 model" in seen["narrowing"]
    )


def test_text_and_html() -> None:
    model = _seeded(TiedLM)
    r = tv.load_check(model, _sd(TiedLM(), lm_head__weight=None), strict=False)
    text = str(r)
    assert max(map(len, text.splitlines())) <= 80
    assert text.splitlines()[:2] == ["load_state_dict(strict=False): dict -> TiedLM", "does not raise"]
    assert "missing (1):\n  lm_head.weight" in text
    page = r._repr_html_()
    assert "<script" not in page and "lm_head.weight" in page


def test_unknown_loader_is_refused() -> None:
    with pytest.raises(ValueError, match="loader must be one of"):
        tv.load_check(TiedLM(), {}, loader="torch.load")


def test_public_docstring_example_runs() -> None:
    import doctest

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(tv.load_check, "load_check", globs={}):
        runner.run(test)
    assert runner.summarize(verbose=False) == doctest.TestResults(0, 4)


# -- safetensors.torch.load_model ------------------------------------------------------------------
def _saved_model(model_cls: Callable[[], nn.Module]) -> Callable[[str], str]:
    def make(tmp: str) -> str:
        from safetensors.torch import save_model

        torch.manual_seed(7)
        path = os.path.join(tmp, "saved.safetensors")
        save_model(model_cls(), path)
        return path

    return make


def _file(**changes: Any) -> Callable[[str], str]:
    def make(tmp: str) -> str:
        from safetensors.torch import save_file

        path = os.path.join(tmp, "file.safetensors")
        save_file({k: v.contiguous() for k, v in _sd(Untied(), **changes).items()}, path)
        return path

    return make


#: name -> (model factory, file factory, strict)
LOAD_MODEL: dict[str, tuple[Callable[[], nn.Module], Callable[[str], str], bool]] = {
    "save_model -> load_model, tied": (lambda: _seeded(TiedLM), _saved_model(TiedLM), True),
    "tied file (one name) into an untied model": (lambda: _seeded(Untied), _saved_model(TiedLM), True),
    "tied file into an untied model, strict=False": (lambda: _seeded(Untied), _saved_model(TiedLM), False),
    "untied file (both names) into a tied model": (lambda: _seeded(TiedLM), _file(), True),
    "untied file into a tied model, strict=False": (lambda: _seeded(TiedLM), _file(), False),
    "resized vocabulary": (lambda: _seeded(Untied), _file(wte__weight=torch.randn(60, 16)), False),
    "extra name in the file": (lambda: _seeded(Untied), _file(extra=torch.zeros(3)), True),
    "a layer missing, strict=False": (lambda: _seeded(Untied), _file(ln__weight=None, ln__bias=None), False),
}


@pytest.mark.parametrize("name", list(LOAD_MODEL))
def test_load_model_prediction_equals_the_real_load(name: str, tmp_path) -> None:
    from safetensors.torch import load_file, load_model

    make_model, make_file, strict = LOAD_MODEL[name]
    model, path = make_model(), make_file(str(tmp_path))
    values = {k: v.detach().clone() for k, v in model.state_dict().items()}
    r = tv.load_check(model, path, loader="safetensors.load_model", strict=strict)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in values.items())  # the check changed nothing
    try:
        missing, unexpected = load_model(model, path, strict=strict)
        error = None
    except Exception as err:  # noqa: BLE001
        missing, unexpected, error = None, None, f"{type(err).__name__}: {err}"
    assert (r.raises, r.error) == (error is not None, error)
    if error is None:
        assert set(r.missing) == set(missing) and sorted(r.unexpected) == sorted(unexpected)
    src, loaded = load_file(path), model.state_dict()
    for n in r.untouched:
        assert torch.equal(loaded[n], values[n]), n
    for c in r.conflicts:
        assert torch.equal(loaded[c.winner], src[c.winner])
        assert all(torch.equal(loaded[n], src[c.winner]) for n in c.names)


def test_load_model_cases_are_not_vacuous(tmp_path) -> None:
    facts = {}
    for name, (make_model, make_file, strict) in LOAD_MODEL.items():
        r = tv.load_check(
            make_model(),
            make_file(str(tmp_path)),
            loader="safetensors.load_model",
            strict=strict,
        )
        facts[name] = (r.raises, r.missing, r.unexpected, bool(r.conflicts), r.untouched)
    assert facts["save_model -> load_model, tied"] == (False, (), (), False, ())
    assert facts["tied file (one name) into an untied model"][:3] == (True, ("wte.weight",), ())
    assert facts["untied file (both names) into a tied model"][:3] == (True, (), ("wte.weight",))
    assert facts["untied file into a tied model, strict=False"][3] is True
    assert facts["a layer missing, strict=False"][4] == ("ln.weight", "ln.bias")


def test_the_twin_shares_nothing_the_loader_writes() -> None:
    from tensorviz.loadcheck.check import model_twin

    model = _seeded(TiedLM)
    hooks = {
        name: (id(m._load_state_dict_post_hooks), len(m._load_state_dict_post_hooks))
        for name, m in model.named_modules()
    }
    twin = model_twin(model)
    twin.register_load_state_dict_post_hook(lambda m, k: None)
    assert twin.lm_head.weight is twin.wte.weight and twin.wte.weight.device.type == "meta"
    assert twin.wte is not model.wte and twin._modules is not model._modules
    assert {
        name: (id(m._load_state_dict_post_hooks), len(m._load_state_dict_post_hooks))
        for name, m in model.named_modules()
    } == hooks
    assert model.wte.weight.device.type == "cpu" and model.lm_head.weight is model.wte.weight


def _library_globals() -> dict[str, Any]:
    """What a load check could swap or leave changed: torch's load path, its global module hooks
    and switches, safetensors' functions, the collector, the warning filters."""
    import gc
    import warnings

    import safetensors.torch
    from torch.nn.modules import module as torch_module

    out: dict[str, Any] = {
        f"Module.{n}": getattr(nn.Module, n)
        for n in ("load_state_dict", "_load_from_state_dict", "state_dict", "__setattr__", "register_module")
    }
    out |= {f"Tensor.{n}": getattr(torch.Tensor, n) for n in ("copy_", "module_load")}
    out |= {f"safetensors.{n}": getattr(safetensors.torch, n) for n in ("load_model", "_remove_duplicate_names")}
    out |= {n: getattr(torch_module, n) for n in dir(torch_module) if n.startswith("_global_")}
    out |= {f"len {n}": len(v) for n, v in list(out.items()) if isinstance(v, (dict, set, list))}
    out["swap on conversion"] = torch.__future__.get_swap_module_params_on_conversion()
    out["overwrite on conversion"] = torch.__future__.get_overwrite_module_params_on_conversion()
    out["default dtype"] = torch.get_default_dtype()
    out["grad enabled"] = torch.is_grad_enabled()
    out["gc"] = (gc.isenabled(), gc.get_threshold())
    out["warnings.filters"] = warnings.filters
    out["filters"] = tuple(warnings.filters)
    return out


def _module_dicts(model: nn.Module) -> dict[str, Any]:
    """Every module's attribute objects (``is``) and, for dicts and sets, their contents."""
    out: dict[str, Any] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        for key, value in vars(m).items():
            out[f"{name}:{key}"] = value
            if isinstance(value, (dict, set)):
                out[f"{name}:{key} contents"] = dict(value) if isinstance(value, dict) else set(value)
    return out


@pytest.mark.parametrize(
    "loader,strict,assign",
    [("load_state_dict", True, False), ("load_state_dict", False, True), ("safetensors.load_model", True, False)],
)
def test_the_check_changes_no_global_and_no_module_attribute(loader: str, strict: bool, assign: bool, tmp_path) -> None:
    """Library globals and every attribute of every module of the model are the same objects
    (and dicts hold the same entries) after the check; the check raised nothing itself."""
    model = _seeded(TiedLM)
    model.ln.register_load_state_dict_pre_hook(lambda *a: None)
    source = _safetensors(str(tmp_path)) if loader != "load_state_dict" else _sd(TiedLM(), extra=torch.zeros(1))
    before, attrs = _library_globals(), _module_dicts(model)
    r = tv.load_check(model, source, loader=loader, strict=strict, assign=assign)
    after, attrs_after = _library_globals(), _module_dicts(model)
    assert r.raises == strict  # an unexpected or missing key each time: the check ran through
    assert after.keys() == before.keys() and attrs_after.keys() == attrs.keys()
    for key, value in before.items():
        assert after[key] is value or (type(value) in (bool, int, tuple) and after[key] == value), key
    for key, value in attrs.items():
        assert attrs_after[key] is value or (" contents" in key and attrs_after[key] == value), key
