"""``from_pretrained``, replayed: transformers' own loading code run with a data-free source.

The real call ``cls.from_pretrained(folder, **kwargs)`` resolves the folder's config and weight
files, picks a dtype, builds the model on meta, renames and converts the checkpoint's keys into
it, initialises what was not loaded, re-ties tied weights and filters what it reports. The
replay runs the same steps with transformers' own functions -- the config class's
``from_pretrained`` (config keywords such as ``tie_word_embeddings=`` applied as the real call
applies them), ``_get_resolved_checkpoint_files`` (which files, a missing shard raising its own
error), ``_get_dtype`` (``dtype="auto"``) -- then ``cls.from_pretrained(None, config=...,
state_dict=twin, device_map="meta")``, where ``twin`` holds a meta tensor per checkpoint tensor,
made from each file's header. Every tensor the library materialises lands on meta: nothing is
read but headers and ``config.json``.

One step the library skips on meta: when a tied pair is present twice in the files,
``tie_weights`` compares the two loaded values and ties them only if equal; on meta it cannot
compare, so the replay reads those two tensors (only those) and decides as the library does.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tensorviz.loadcheck.fixes import pretrained_fixes

__all__ = ["predict_from_pretrained", "LOAD_KEYWORDS", "pretrained_class"]

#: from_pretrained keywords the loading steps read; every other keyword goes to the config (or to
#: the model's ``__init__`` when a config object is given), as ``from_pretrained`` sends them.
LOAD_KEYWORDS = frozenset(
    {"dtype", "torch_dtype", "ignore_mismatched_sizes", "key_mapping", "variant", "use_safetensors", "weights_only"}
)


@dataclass(frozen=True)
class _Replay:
    """What the replayed call left: the meta model, transformers' loading info, the twin."""

    model: Any
    info: dict
    twin: OrderedDict
    files: tuple[str, ...]


def pretrained_class(model: Any) -> tuple[Any, Any]:
    """``(model class, config or None)`` for a PreTrainedModel class, an instance (its class and
    its config), or a config (the class its ``architectures`` names, else ``AutoModel``'s)."""
    import transformers

    if isinstance(model, type) and issubclass(model, transformers.PreTrainedModel):
        return model, None
    if isinstance(model, transformers.PreTrainedModel):
        return type(model), model.config
    if isinstance(model, transformers.PretrainedConfig):
        names = getattr(model, "architectures", None) or []
        cls = getattr(transformers, names[0], None) if names else None
        if cls is None:
            cls = transformers.AutoModel._model_mapping[type(model)]
        return cls, model
    raise TypeError(
        f"from_pretrained needs a transformers model class, a model or a config as `model`, got {type(model).__name__}"
    )


def _config(cls: Any, config: Any, folder: str, kwargs: dict) -> tuple[Any, dict]:
    """The config the real call would use and the keywords left for the model's ``__init__``."""
    if config is not None:
        return copy.deepcopy(config), kwargs
    config_kwargs = {k: v for k, v in kwargs.items() if k not in LOAD_KEYWORDS}
    return cls.config_class.from_pretrained(folder, return_unused_kwargs=True, local_files_only=True, **config_kwargs)


def _files(cls: Any, config: Any, folder: str, kwargs: dict) -> tuple[list[str], dict | None]:
    from transformers import modeling_utils as mu

    files, sharded = mu._get_resolved_checkpoint_files(
        pretrained_model_name_or_path=folder,
        variant=kwargs.get("variant"),
        gguf_file=None,
        use_safetensors=kwargs.get("use_safetensors"),
        user_agent={"file_type": "model", "framework": "pytorch", "from_auto_class": False},
        is_remote_code=cls.is_remote_code(),
        transformers_explicit_filename=getattr(config, "transformers_weights", None),
        download_kwargs={"local_files_only": True},
    )
    return files or [], sharded


def _twin(files: list[str]) -> OrderedDict:
    """A meta tensor per tensor of ``files``, from their headers, in the files' order (a file
    that is not there raises what safetensors raises opening it)."""
    import torch

    from tensorviz.sources import analyze

    out: OrderedDict = OrderedDict()
    for path in files:
        if path.endswith(".safetensors") and not os.path.exists(path):
            from safetensors import safe_open

            safe_open(path, framework="pt")  # the error the real load meets (a missing shard)
        for v in analyze(path).views:
            out[v.name] = torch.empty_strided(v.shape, v.stride, dtype=getattr(torch, v.dtype), device="meta")
    return out


def _replay(model: Any, folder: str, kwargs: Mapping[str, Any]) -> _Replay:
    """Run transformers' loading steps with the files' meta twin (raises what the real call raises)."""
    from transformers import modeling_utils as mu

    cls, given = pretrained_class(model)
    kwargs = dict(kwargs)
    config, model_kwargs = _config(cls, given, folder, kwargs)
    files, sharded = _files(cls, config, folder, kwargs)
    dtype = kwargs.get("dtype", kwargs.get("torch_dtype", "auto"))
    _, dtype = mu._get_dtype(dtype, files, copy.deepcopy(config), sharded, None, kwargs.get("weights_only", True))
    twin = _twin(files)
    load = {k: kwargs[k] for k in ("ignore_mismatched_sizes", "key_mapping") if k in kwargs}
    meta, info = cls.from_pretrained(
        None,
        config=config,
        state_dict=twin,
        device_map="meta",
        dtype=dtype,
        output_loading_info=True,
        **load,
        **{k: v for k, v in model_kwargs.items() if k not in LOAD_KEYWORDS},
    )
    _tie_equal_pairs(meta, twin, files)
    return _Replay(meta, info, twin, tuple(files))


def _tie_equal_pairs(model: Any, twin: Mapping, files: list[str]) -> None:
    """``tie_weights`` on a pair present twice in the files: tied if the two loaded values are
    equal, else dropped from ``all_tied_weights_keys`` (transformers warns). On meta the library
    skips the comparison; here the two tensors are read and compared, after the cast the load does."""
    from transformers.distributed.sharding_utils import _tied_params_are_equal

    tied = getattr(model, "all_tied_weights_keys", {}) or {}
    for target, source in list(tied.items()):
        s, t = model.get_parameter_or_buffer(source), model.get_parameter_or_buffer(target)
        if s is t or source not in twin or target not in twin:
            continue
        a, b = _read(files, source, s.dtype), _read(files, target, t.dtype)
        if _tied_params_are_equal(a, b):
            parent, _, name = target.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, name, s)
        else:
            tied.pop(target)


def _read(files: list[str], name: str, dtype: Any) -> Any:
    """One tensor's values, from whichever of ``files`` holds it, cast as the load casts it."""
    import torch

    for path in files:
        if path.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(path, framework="pt") as f:
                if name in f.keys():
                    return f.get_tensor(name).to(dtype)
        else:
            sd = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
            if name in sd:
                return sd[name].to(dtype)
    raise KeyError(name)


def _source_keys(model: Any, twin: Mapping, kwargs: Mapping) -> dict[str, list[str]]:
    """Per model key, the checkpoint keys transformers renames (or converts) into it."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    mapping = get_model_conversion_mapping(model, kwargs.get("key_mapping"), None)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    meta_sd = model.state_dict()
    out: dict[str, list[str]] = {}
    for key in twin:
        renamed, _ = rename_source_key(key, renamings, converters, model.base_model_prefix, meta_sd)
        if renamed not in meta_sd and key in meta_sd:
            renamed, _ = rename_source_key(key, [], [], model.base_model_prefix, meta_sd)
        out.setdefault(renamed, []).append(key)
    return out


def predict_from_pretrained(model: Any, folder: str, kwargs: Mapping[str, Any]) -> dict:
    """The load report's facts for ``from_pretrained(folder, **kwargs)`` (see module doc)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            r = _replay(model, folder, kwargs)
        except Exception as err:  # noqa: BLE001 -- whatever the library raises is the prediction
            return _raised(f"{type(err).__name__}: {err}", model, kwargs)
    return _facts(r, kwargs)


def _raised(error: str, model: Any, kwargs: Mapping) -> dict:
    facts = dict(
        raises=True, error=error, missing=(), unexpected=(), mismatched=(), cast=(), conflicts=(), untouched=()
    )
    name = pretrained_class(model)[0].__name__
    return dict(facts, fixes=pretrained_fixes(facts, name, kwargs, {}, None))


def _facts(r: _Replay, kwargs: Mapping) -> dict:
    sd = r.model.state_dict(keep_vars=True)
    sources = _source_keys(r.model, r.twin, kwargs)
    mismatched = sorted((k, tuple(m), tuple(s)) for k, s, m in r.info["mismatched_keys"])
    bad = {k for k, _, _ in mismatched}
    tied = getattr(r.model, "all_tied_weights_keys", {}) or {}
    retied = tuple(sorted((t, s) for t, s in tied.items() if sd.get(t) is sd.get(s) and t in sd))
    fed_by = {t: s for t, s in retied if t not in sources}  # a tie's target holds its source's values
    cast = []
    for key, tensor in sd.items():
        dtypes = {r.twin[s].dtype for s in sources.get(fed_by.get(key, key), ())}
        if key not in bad and dtypes and dtypes != {tensor.dtype}:
            cast.append((key, _name(next(iter(dtypes))), _name(tensor.dtype)))
    initialized = tuple(k for k, t in sd.items() if not getattr(t, "_is_hf_initialized", False))
    facts = dict(
        raises=False,
        error=None,
        missing=tuple(sorted(r.info["missing_keys"])),
        unexpected=tuple(sorted(r.info["unexpected_keys"])),
        mismatched=tuple(mismatched),
        cast=tuple(cast),
        conflicts=(),
        untouched=initialized,
        retied=retied,
        not_tied=tuple(sorted(_not_tied(r.model, tied, sd))),
    )
    floats = {_name(t.dtype) for t in r.twin.values() if t.is_floating_point()}
    targets = dict(getattr(type(r.model), "_tied_weights_keys", None) or {})
    cls = type(r.model).__name__
    return dict(facts, fixes=pretrained_fixes(facts, cls, kwargs, targets, floats.pop() if len(floats) == 1 else None))


def _not_tied(model: Any, tied: Mapping, sd: Mapping) -> list[tuple[str, str]]:
    """Pairs the model's tie mapping asks for that the load left apart (both in the files,
    different values: transformers warns and keeps both)."""
    wanted = model.get_expanded_tied_weights_keys(all_submodels=True)
    return [(t, s) for t, s in wanted.items() if t not in tied and t in sd and sd[t] is not sd.get(s)]


def _name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")
