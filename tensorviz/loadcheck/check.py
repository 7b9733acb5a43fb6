"""``tv.load_check``: each loader's own code, run on data-free twins.

The model's twin is a copy of its module tree whose every parameter and buffer is a meta tensor
of the same shape, stride and dtype (a tie stays one object; see :func:`model_twin`); the
source's twin is an ordered mapping of meta tensors made from the source's layout (a file is read
header-only), keeping a state dict's ``_metadata`` (versions that modules such as BatchNorm read).
torch's ``Module.load_state_dict`` then runs on the twins: its messages, missing and unexpected
keys are torch's own (a post-hook on the twin's root records the keys before torch raises).
What a load does to memory -- casts, which source tensor wins bytes two names share, what is left
untouched, ties that ``assign=True`` breaks -- comes from the two layouts and the keys torch fed.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tensorviz.core.errors import OptionError
from tensorviz.core.keywords import did_you_mean
from tensorviz.core.layout import Layout
from tensorviz.core.rows import gc_paused
from tensorviz.loadcheck.fixes import state_dict_fixes
from tensorviz.loadcheck.replay import load_state_dict as replay_load_state_dict
from tensorviz.loadcheck.replay import replays
from tensorviz.loadcheck.report import Conflict, LoadReport

__all__ = ["load_check", "LOADERS", "model_twin", "source_twin", "meta_model_from_config", "config_from"]


def model_twin(model: Any) -> Any:
    """A copy of ``model``'s module tree on meta: each module a new object of its class whose
    attribute dict is a shallow copy of the original's, with its own parameter, buffer, child
    and hook dicts; parameters and buffers become meta tensors of the same shape, stride and
    dtype (a tie stays one object; ``requires_grad`` kept). No data is copied, and nothing is
    written to ``model`` (a hook registered on the twin goes to the twin's own dict).

    Faster than ``copy.deepcopy`` (which copies every attribute, configs included), and enough
    for what a loader reads: the tree, the tensors, the hooks and each class's own methods."""
    import torch

    memo: dict[int, Any] = {}
    copied: dict[tuple, tuple] = {}  # attribute names -> those naming hook dicts and sets
    return _twin_module(model, memo, copied, torch.nn.Parameter)


def _twin_module(module: Any, memo: dict[int, Any], copied: dict[tuple, tuple], parameter: Any) -> Any:
    if id(module) in memo:
        return memo[id(module)]
    twin = object.__new__(type(module))
    memo[id(module)] = twin
    attrs = module.__dict__.copy()
    names = tuple(attrs)
    own = copied.get(names)
    if own is None:  # the hook dicts, _non_persistent_buffers_set (one scan per attribute layout)
        own = copied[names] = tuple(k for k in names if k.endswith("hooks") or k.endswith("_set"))
    for key in own:
        value = attrs[key]
        attrs[key] = value.copy() if isinstance(value, (dict, set)) else copy.copy(value)  # dict.copy: 5x copy.copy
    attrs["_parameters"] = {k: _twin_tensor(v, memo, parameter) for k, v in module._parameters.items()}
    attrs["_buffers"] = {k: _twin_tensor(v, memo, parameter) for k, v in module._buffers.items()}
    attrs["_modules"] = {
        k: None if c is None else _twin_module(c, memo, copied, parameter) for k, c in module._modules.items()
    }
    object.__setattr__(twin, "__dict__", attrs)
    return twin


def _twin_tensor(t: Any, memo: dict[int, Any], parameter: Any) -> Any:
    if t is None:
        return None
    twin = memo.get(id(t))
    if twin is None:
        twin = _meta_like(t)
        if isinstance(t, parameter):
            twin = parameter(twin, requires_grad=t.requires_grad)
        memo[id(t)] = twin
    return twin


def source_twin(source: Any, layout: Layout | None) -> OrderedDict:
    """Meta tensors standing for the source's tensors, in the order the real mapping has them.

    A mapping keeps its own keys and order (a value that is not a tensor stays as it is, so torch
    says what it says about it) and a copy of its ``_metadata``; anything else is twinned from its
    layout's views (a file's header)."""
    import torch

    if isinstance(source, Mapping):
        out = OrderedDict((k, _meta_like(v) if isinstance(v, torch.Tensor) else v) for k, v in source.items())
        metadata = getattr(source, "_metadata", None)
        if metadata is not None:
            out._metadata = copy.deepcopy(metadata)  # type: ignore[attr-defined]  # torch may write into it
        return out
    assert layout is not None  # a source that is not a mapping was analysed
    return OrderedDict((v.name, _meta_from_view(v)) for v in layout.views)


def _meta_like(t: Any) -> Any:
    import torch

    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _meta_from_view(v: Any) -> Any:
    import torch

    return torch.empty_strided(v.shape, v.stride, dtype=getattr(torch, v.dtype), device="meta")


def _torch_keys(twin: Any, source: OrderedDict, strict: bool, assign: bool) -> tuple[list, list, str | None]:
    """Run ``twin.load_state_dict(source)``: torch's missing and unexpected keys, and its error."""
    seen: dict[str, list[str]] = {}

    def record(module: Any, keys: Any) -> None:
        seen["missing"], seen["unexpected"] = list(keys.missing_keys), list(keys.unexpected_keys)

    twin.register_load_state_dict_post_hook(record)
    error = None
    try:
        if replays(twin):  # torch's own load_state_dict, each child's share cut in one pass
            replay_load_state_dict(twin, source, strict=strict, assign=assign)
        else:  # a subclass's own load_state_dict
            twin.load_state_dict(source, strict=strict, assign=assign)
    except Exception as err:  # noqa: BLE001 -- whatever torch raises is the prediction
        error = f"{type(err).__name__}: {err}"
    return seen.get("missing", []), seen.get("unexpected", []), error


def _fed(model_sd: Mapping, source: Mapping) -> tuple[list[str], list[tuple], list[tuple]]:
    """The model keys torch copies into (a tensor of the right shape in the source, after torch's
    0-dim rule), shape mismatches, and casts -- in the model's state-dict order (torch's order)."""
    import torch

    fed, mismatched, cast = [], [], []
    for name, p in model_sd.items():
        t = source.get(name)
        if not isinstance(t, torch.Tensor) or not isinstance(p, torch.Tensor):
            continue
        shape = tuple(t.shape)
        if p.dim() == 0 and len(shape) == 1:  # torch reads input_param[0] here (an old format)
            shape = shape[1:]
        if shape != tuple(p.shape):
            mismatched.append((name, tuple(p.shape), tuple(t.shape)))
            continue
        fed.append(name)
        if t.dtype != p.dtype:
            cast.append((name, str(t.dtype).removeprefix("torch."), str(p.dtype).removeprefix("torch.")))
    return fed, mismatched, cast


def _memory_effects(ml: Layout, sl: Layout | None, fed: list[str], to_source: dict[str, str], assign: bool) -> tuple:
    """Conflicts (copy), ties broken (assign) and the untouched model names, from the layouts."""
    fed_set = set(fed)
    order = {n: i for i, n in enumerate(fed)}
    same = _source_group(sl)
    conflicts, broken = [], []
    written: set[str] = set()
    for group in ml.shared("overlap"):
        names = [n for n in group.names if n in fed_set]
        if names:
            written.update(group.names)
        distinct = {same(to_source[n]) for n in names}
        if not assign and len(names) >= 2 and len(distinct) >= 2:
            names.sort(key=order.__getitem__)
            conflicts.append(Conflict(tuple(names), names[-1]))
    if assign:
        written = set()
        for group in ml.shared("span"):
            sources = {same(to_source[n]) if n in fed_set else ("unfed", n) for n in group.names}
            if len(sources) >= 2:
                broken.append(frozenset(group.names))
    untouched = tuple(n for n in ml.names if n not in fed_set and n not in written)
    return tuple(conflicts), tuple(broken), untouched


def _source_group(sl: Layout | None):
    """Per source name, its span group in the source (names without a layout stand alone)."""
    if sl is None:
        return lambda name: name
    index = sl.group_index("span")
    return lambda name: int(index[sl.position(name)]) if name in sl else name


def _load_state_dict(model: Any, source: Any, ml: Layout, sl: Layout | None, strict: bool, assign: bool) -> dict:
    twin_source = source_twin(source, sl)
    missing, unexpected, error = _torch_keys(model_twin(model), twin_source, strict, assign)
    model_sd = model.state_dict(keep_vars=True)
    fed, mismatched, cast = _fed(model_sd, twin_source)
    if assign:
        cast = []  # the parameter becomes the source tensor: nothing is converted
    conflicts, broken, untouched = _memory_effects(ml, sl, fed, {n: n for n in fed}, assign)
    untouched = tuple(n for n in untouched if n in model_sd)
    facts = dict(
        raises=error is not None,
        error=error,
        missing=tuple(missing),
        unexpected=tuple(unexpected),
        mismatched=tuple(mismatched),
        cast=tuple(cast),
        conflicts=conflicts,
        untouched=untouched,
        ties_broken=broken,
    )
    ties = [g.names for g in ml.shared("span")]
    return dict(facts, fixes=state_dict_fixes(facts, ties, strict, assign))


def _load_model(model: Any, source: Any, ml: Layout, sl: Layout | None, strict: bool, assign: bool) -> dict:
    """``safetensors.torch.load_model(model, file, strict=)``, replayed: the file twinned from its
    header, safetensors' own ``_remove_duplicate_names`` on the model's state dict (it reads
    storage addresses and sizes only), torch's ``load_state_dict(strict=False)`` on the twins,
    then load_model's own reconciliation of missing and unexpected names and its message."""
    from safetensors.torch import _remove_duplicate_names

    if assign:
        raise OptionError("safetensors.torch.load_model has no assign=; pass assign=False")
    if sl is None or isinstance(source, Mapping):
        raise OptionError("safetensors.load_model reads a .safetensors file: pass its path as source")
    twin_source = source_twin(source, sl)
    facts = dict(_load_state_dict(model, source, ml, sl, False, False), fixes=())  # its fixes are load_state_dict's
    if facts["raises"]:  # a shape mismatch raises inside load_state_dict, even with strict=False
        return facts
    try:
        to_removes = _remove_duplicate_names(model.state_dict(), preferred_names=list(twin_source.keys()))
    except RuntimeError as err:
        return dict(facts, raises=True, error=f"RuntimeError: {err}")
    missing, unexpected = set(facts["missing"]), list(facts["unexpected"])
    for group in to_removes.values():
        for name in group:
            if name not in missing:
                unexpected.append(name)
            else:
                missing.remove(name)
    error = None
    if strict and (missing or unexpected):
        error = f"RuntimeError: Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(missing))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
    missing_in_order = tuple(n for n in facts["missing"] if n in missing)
    return dict(facts, raises=error is not None, error=error, missing=missing_in_order, unexpected=tuple(unexpected))


@dataclass(frozen=True)
class Call:
    """The loader call being predicted: ``strict``, ``assign`` and the loader's other keywords."""

    strict: bool
    assign: bool
    kwargs: Mapping[str, Any]


def _torch_loader(predict: Any) -> Any:
    """A load_state_dict-shaped predictor (model and source analysed first) as a loader entry."""

    def run(model: Any, source: Any, call: Call) -> tuple[dict, str, str]:
        ml = model_layout(model)
        sl = source if isinstance(source, Layout) else _source_layout(source)
        facts = predict(model, source, ml, sl, call.strict, call.assign)
        return facts, type(model).__name__, sl.source if sl is not None else type(source).__name__

    return run


def _pretrained(model: Any, source: Any, call: Call) -> tuple[dict, str, str]:
    import os

    from tensorviz.loadcheck.pretrained import predict_from_pretrained, pretrained_class

    if call.assign:
        raise OptionError("from_pretrained has no assign=; pass assign=False")
    folder = os.fspath(source)
    return predict_from_pretrained(model, folder, call.kwargs), pretrained_class(model)[0].__name__, folder


def _dcp(model: Any, source: Any, call: Call) -> tuple[dict, str, str]:
    import os

    from tensorviz.loadcheck.dcp_load import predict_dcp_load

    if call.assign:
        raise OptionError("dcp.load has no assign=; pass assign=False")
    folder = os.fspath(source)
    return predict_dcp_load(model, folder, call.strict, call.kwargs), type(model).__name__, folder


#: loader name -> the function predicting it (one entry per loader).
LOADERS = {
    "load_state_dict": _torch_loader(_load_state_dict),
    "safetensors.load_model": _torch_loader(_load_model),
    "from_pretrained": _pretrained,
    "dcp.load": _dcp,
}


def load_check(
    model: Any,
    source: Any,
    *,
    loader: str = "load_state_dict",
    strict: bool = True,
    assign: bool = False,
    loader_kwargs: Mapping[str, Any] | None = None,
) -> LoadReport:
    """What ``loader`` would do loading ``source`` into ``model``, predicted on twins (see
    :func:`tensorviz.load_check`)."""
    if loader not in LOADERS:
        raise OptionError(f"loader must be one of {sorted(LOADERS)}, got {loader!r}{did_you_mean(loader, LOADERS)}")
    if loader_kwargs and loader in ("load_state_dict", "safetensors.load_model"):
        raise OptionError(f"{loader} takes no loader_kwargs (only strict= and assign=)")
    call = Call(strict, assign, dict(loader_kwargs or {}))
    with gc_paused():  # thousands of twins and records: no collector pass over the caller's heap
        facts, name, where = LOADERS[loader](model, source, call)
    words = ", ".join([*_given_config(loader, model), *(f"{k}={v!r}" for k, v in call.kwargs.items())])
    return LoadReport(loader=loader, model=name, source=where, strict=strict, assign=assign, keywords=words, **facts)


def _given_config(loader: str, model: Any) -> list[str]:
    """The config a from_pretrained prediction passes, in the call's words: a model instance's
    own (``config=model.config``) or the config given; the folder's own config.json is read only
    when a class is given. Said in the report so no one compares it with a call that reads the folder's."""
    if loader != "from_pretrained" or isinstance(model, type):
        return []
    return ["config=model.config" if hasattr(model, "config") else "config=config"]


def model_layout(model: Any) -> Layout:
    """``tv.analyze(model)``'s names and groups, read from what the module walk reads -- the
    state dict (``keep_vars=True``), then the buffers it leaves out -- as a mapping: 7x less
    time on the 9,005-tensor GPT-2 (0.018 s against 0.136 s: no module facts, no second state
    dict). Where the module walk does more than read those (FSDP2 mid-step, a tensor that is
    not a plain tensor or Parameter: quantized weights, DTensors, subclasses), it is the
    module's own analysis. tests/loadcheck/test_loadcheck_replay.py compares the two on the
    model zoo, the load zoo and generated trees."""
    import torch

    from tensorviz.sources import analyze
    from tensorviz.sources.distributed.fsdp_units import gathered_to_sharded

    if gathered_to_sharded(model):
        return analyze(model)
    state = model.state_dict(keep_vars=True)
    plain = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)
    if not isinstance(state, Mapping) or any(type(t) not in plain for t in state.values()):
        return analyze(model)
    items = OrderedDict(state)
    for name, buf in model.named_buffers(remove_duplicate=False):
        if name not in state and buf is not None:
            items[name] = buf
    return analyze(items)


def _source_layout(source: Any) -> Layout | None:
    """The source's layout; None for a mapping tensorviz cannot lay out (torch still judges it)."""
    from tensorviz.sources import analyze

    if isinstance(source, Mapping):
        import torch

        tensors = {k: v for k, v in source.items() if isinstance(v, torch.Tensor)}
        return analyze(tensors)
    return analyze(source)


def config_from(path: str) -> Any:
    """The transformers config of a model folder (or of a ``config.json``)."""
    import os

    import transformers

    return transformers.AutoConfig.from_pretrained(os.path.dirname(path) if os.path.isfile(path) else path)


def meta_model_from_config(path: str) -> Any:
    """The transformers model a folder's (or a ``config.json``'s) config describes, built on meta
    (no weights): the class named first in ``config.architectures``, else ``AutoModel``."""
    import torch
    import transformers

    config = config_from(path)
    names = getattr(config, "architectures", None) or []
    cls = getattr(transformers, names[0], None) if names else None
    with torch.device("meta"):
        return cls(config) if cls is not None else transformers.AutoModel.from_config(config)
