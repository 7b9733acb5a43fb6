"""What transformers' ``save_pretrained`` and accelerate's savers would do, by their own helpers."""

from __future__ import annotations

import collections
from typing import Any

import torch

from tensorviz.savecheck.savers.common import (
    _ST,
    Run,
    Unavailable,
    _anchor,
    _dropped,
    _err,
    _guard,
    _helper,
    _library_failure,
    _only_standins,
    _save_file_into,
    memoised,
)
from tensorviz.savecheck.savers.quantizers import quantizer_state
from tensorviz.savecheck.standin import StandIn, from_meta

__all__ = ["evaluate_save_pretrained", "evaluate_accelerate_save", "evaluate_accelerator_save_model"]


# -- transformers ---------------------------------------------------------------------------------
_TF = "transformers.modeling_utils"


def _declared_tie_targets(model: Any) -> set[str]:
    """The names ``from_pretrained`` re-ties on load (so dropping them on save loses nothing)."""
    tied = getattr(model, "all_tied_weights_keys", None)
    if tied is None and hasattr(model, "get_expanded_tied_weights_keys"):
        tied = model.get_expanded_tied_weights_keys(all_submodels=True)
    return set(tied or ())


def evaluate_save_pretrained(model: Any, sd: dict[str, Any]) -> Run:
    """``model.save_pretrained(directory)`` (safetensors, one or more shards), in its own order.

    As transformers' ``save_pretrained`` does (src/transformers/modeling_utils.py, 5.x): take
    the state dict and metadata its quantizer hands over, if it has one (torchao's flattened
    inner tensors, see :mod:`~tensorviz.savecheck.savers.quantizers`), drop the model's ``_keys_to_ignore_on_save``, de-duplicate with
    ``remove_tied_weights_from_state_dict``, revert the weight conversions with
    ``revert_weight_conversion`` (renames such as GPT-NeoX's ``lm_head`` -> ``embed_out``, and
    MoE experts split back into one tensor each), shard, make each tensor contiguous and call
    ``save_file``. The conversion step runs on meta twins, never on stand-ins: its converters call
    torch ops (``torch.chunk``, ``torch.cat``) that would need data.
    """
    run = Run(tuple(sd))
    _only_standins(sd, "save_pretrained")
    if getattr(model, "_hf_peft_config_loaded", False):
        raise Unavailable("PEFT models save a converted state dict tensorviz does not replay")
    remove_tied = _helper(_TF, "remove_tied_weights_from_state_dict")
    try:
        sd, metadata = quantizer_state(run, model, sd)
    except Unavailable:
        raise
    except Exception as e:  # noqa: BLE001 - the quantizer's own refusal is the finding
        _guard(e)
        run.error = _err(e)
        return run
    _anchor_transformers(run, sd)
    sd = dict(sd)
    for key in getattr(model, "_keys_to_ignore_on_save", None) or ():
        if sd.pop(key, None) is not None:
            run.ignored.append(key)
    try:
        kept = remove_tied(sd, model)
    except Exception as e:  # noqa: BLE001
        _guard(e)
        run.error = _err(e)
        return run
    kept = _revert_conversion(run, model, kept)
    with _library_failure(run):
        for filename, names in _shards(kept, "model{suffix}.safetensors", "50GB").items():
            _save_file_into(run, {k: kept[k].contiguous() for k in names}, dict(metadata))
            run.files[-1] = (filename,) + run.files[-1][1:]
    if run.error is not None:
        return run
    gone = {*run.carried, *run.ignored}
    run.dropped = [k for k in run.given if k not in run.written and k not in gone]
    targets = _declared_tie_targets(model)
    for name in run.dropped:
        if name not in targets:
            run.notes.append(
                f"from_pretrained will not restore {name}: it is dropped as a duplicate, "
                f"but the model does not declare it tied (all_tied_weights_keys)"
            )
    _judge_ignored(run, model)
    return run


def _judge_ignored(run: Run, model: Any) -> None:
    """Names left out by ``_keys_to_ignore_on_save``: kept as ignored only where from_pretrained
    rebuilds them (the model's ``_init_weights`` replayed on a meta twin, see
    :mod:`tensorviz.savecheck.init_replay`); the others are dropped names it will not restore."""
    from tensorviz.savecheck.init_replay import init_rebuild

    rebuilt = []
    for name in run.ignored:
        how = init_rebuild(model, name)
        if how == "rebuilt":
            rebuilt.append(name)
            continue
        run.dropped.append(name)
        why = {
            "re-initialised": "its _init_weights re-initialises it",
            "untouched": "its _init_weights leaves it as __init__ made it",
        }.get(how, f"lost unless your _init_weights rebuilds it ({how})")
        run.notes.append(f"from_pretrained does not bring back {name}: listed in _keys_to_ignore_on_save, and {why}")
    run.ignored[:] = rebuilt
    if rebuilt:
        run.notes.append(
            "the names the model ignores on save (_keys_to_ignore_on_save) are built again by from_pretrained "
            "(its _init_weights computes them)"
        )


def _anchor_transformers(run: Run, sd: dict[str, Any]) -> None:
    """The groups ``save_pretrained`` finds: names by storage, then its ``_find_disjoint``.

    The grouping key is transformers' ``id_tensor_storage`` (src/transformers/pytorch_utils.py):
    for a tensor that is neither a DTensor nor on XLA -- every stand-in -- it is (device, storage
    address, storage size), read here straight off the stand-ins.
    """
    _helper("transformers.pytorch_utils", "id_tensor_storage")  # the rule replayed must exist
    find_disjoint = _helper(_TF, "_find_disjoint")
    run.anchor_name = f"{_TF}._find_disjoint"
    groups: dict[Any, list[str]] = collections.defaultdict(list)
    for name, t in sd.items():
        if isinstance(t, StandIn) and t.device.type != "meta":
            st = t.untyped_storage()
            groups[t.device, st.data_ptr(), st.nbytes()].append(name)
    shared = [set(g) for g in groups.values() if len(g) > 1]
    try:
        run.anchor = [frozenset(g) for g in find_disjoint(shared, sd)[0]]
    except Exception as e:  # noqa: BLE001
        _guard(e)
        run.anchor_error = _err(e)


def _revert_conversion(run: Run, model: Any, sd: dict[str, Any]) -> dict[str, Any]:
    """transformers' own ``revert_weight_conversion`` on meta twins, mapped back to stand-ins.

    An output that reads a twin's storage is a view of that stand-in's storage; anything else is
    a copy. Each written name that differs from the given name it reads is a rename (``renamed``);
    the given names it consumed are carried into the file, not dropped.
    """
    try:
        revert = _helper("transformers.core_model_loading", "revert_weight_conversion")
    except Unavailable:
        return sd
    if _no_conversions(revert, model):
        return sd
    metas: dict[int, Any] = {}
    twins = {k: v.meta_twin(metas) for k, v in sd.items()}
    owners: dict[int, list[str]] = collections.defaultdict(list)
    for k, v in sd.items():
        owners[id(v.untyped_storage())].append(k)
    by_meta = {torch._C._storage_id(twins[names[0]]): names for names in owners.values()}  # type: ignore[attr-defined]  # torch's stubs omit it
    try:
        out = revert(model, twins)
    except Exception as e:  # noqa: BLE001 - a converter that needs data: say so, never guess
        raise Unavailable(f"its weight-conversion step cannot run without data ({type(e).__name__}: {e})") from None
    if list(out) == list(sd):
        return sd
    result = {}
    for name, t in out.items():
        if not isinstance(t, torch.Tensor) or t.device.type != "meta":
            raise Unavailable(f"its weight-conversion step returned {type(t).__name__} for {name!r}")
        owners_here = by_meta.get(torch._C._storage_id(t), [])  # type: ignore[attr-defined]  # torch's stubs omit it
        source = _owner(owners_here, sd, t) if owners_here else ""
        storage = sd[source].untyped_storage() if source else None
        device = sd[source].device if source else next(iter(sd.values())).device
        result[name] = from_meta(t, storage, device, getattr(sd[source], "source", source) if source else name)
        if name not in sd:
            run.renamed.append((source, name))
    run.carried.extend(k for k in sd if k not in result)
    _attribute(run, revert, model, twins)
    return result


def _no_conversions(revert: Any, model: Any) -> bool:
    """The library's own quick escape: with no conversion for this model it hands back the very
    dict it was given (asked with an empty one, so no twin is made for nothing)."""
    probe: dict[str, Any] = {}
    try:
        return revert(model, probe) is probe
    except Exception:  # noqa: BLE001 - then the full run says what fails
        return False


def _attribute(run: Run, revert: Any, model: Any, twins: dict[str, Any]) -> None:
    """Outputs made as copies name no source; revert each unpaired given name alone to learn
    which outputs it becomes (meta twins again; a converter needing several inputs stays unpaired)."""
    unknown = {new for old, new in run.renamed if not old}
    if not unknown:
        return
    paired = {old for old, _ in run.renamed if old}
    found: dict[str, str] = {}
    for name in run.carried:
        if name in paired:
            continue
        try:
            alone = revert(model, {name: twins[name]})
        except Exception:  # noqa: BLE001, S112 - needs its partners: left unpaired
            continue
        found.update({new: name for new in alone if new in unknown})
    run.renamed[:] = [(old or found.get(new, ""), new) for old, new in run.renamed]


def _owner(names: list[str], sd: dict[str, Any], t: Any) -> str:
    """The given name whose bytes contain the output's (the first one when several do)."""
    start = t.storage_offset() * t.element_size()
    for name in names:
        v = sd[name]
        if v.storage_offset() * v.element_size() <= start < max(v.reach_nbytes(), 1):
            return name
    return names[0]


def _shards(sd: dict[str, Any], pattern: str, max_size: str) -> dict[str, list[str]]:
    """huggingface_hub's ``split_torch_state_dict_into_shards`` plan (file name -> tensor names).

    Its rule (huggingface_hub/serialization/_base.py, ``split_state_dict_into_shards_factory``):
    strings are skipped, each storage is counted once at its full size (meta tensors each count),
    and while the total stays within ``max_size`` everything goes into one file named with an empty
    suffix. That common case is read off the stand-ins; a larger model asks the library itself.
    """
    parse = _helper("huggingface_hub.serialization._base", "parse_size_to_int")
    seen: set[int] = set()
    total = 0
    for v in sd.values():
        if isinstance(v, StandIn) and (v.device.type == "meta" or id(v.untyped_storage()) not in seen):
            seen.add(id(v.untyped_storage()))
            total += v.untyped_storage().nbytes()
    if total <= parse(max_size):
        return {pattern.format(suffix=""): [k for k, v in sd.items() if not isinstance(v, str)]}
    split = _helper("huggingface_hub", "split_torch_state_dict_into_shards")
    try:
        return dict(split(sd, filename_pattern=pattern, max_shard_size=max_size).filename_to_tensors)
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"huggingface_hub could not plan the shards ({type(e).__name__}: {e})") from None


# -- accelerate -----------------------------------------------------------------------------------
_ACC = "accelerate.utils.other"


def _clean_for_safetensors(sd: dict[str, Any], id_storage: Any) -> tuple[dict[str, Any], list[str], list]:
    """accelerate's ``clean_state_dict_for_safetensors``, rule for rule, the warning it logs, and
    its groups by storage (the anchor).

    Read from accelerate's own function (src/accelerate/utils/other.py, 0.2x to 1.15): names are
    grouped by its ``id_tensor_storage`` (strings skipped, as bitsandbytes puts them there),
    every name after the first of a group is deleted, one warning lists the deleted names as a
    set, and the rest is made ``.contiguous()``. Re-done here rather than called because it logs
    through accelerate's module logger, which needs an initialised ``PartialState`` and which
    tensorviz must not swap (another thread would see the swap); nothing of accelerate changes.
    """
    ptrs: dict[Any, list[str]] = collections.defaultdict(list)
    for name, tensor in sd.items():
        if not isinstance(tensor, str):
            ptrs[id_storage(tensor)].append(name)
    state = dict(sd)
    warn_names: set[str] = set()
    for names in (names for names in ptrs.values() if len(names) > 1):
        found = [name for name in names if name in state]
        warn_names.update(found[1:])
        for name in found[1:]:
            del state[name]
    logs = []
    if warn_names:
        logs.append(
            f"Removed shared tensor {warn_names} while saving. This should be OK, but check by verifying "
            f"that you don't receive any warning while reloading"
        )
    anchor = [frozenset(n for n in names if isinstance(sd[n], StandIn)) for names in ptrs.values()]
    out = {k: v.contiguous() if isinstance(v, StandIn) else v for k, v in state.items()}
    return out, logs, [g for g in anchor if g]


def _accelerate_clean(run: Run, sd: dict[str, Any]) -> dict[str, Any]:
    _only_standins(sd, "accelerate")
    _helper(_ACC, "clean_state_dict_for_safetensors")  # the function whose rule is replayed must exist
    id_storage = _helper("accelerate.utils.modeling", "id_tensor_storage")
    out, logs, anchor = memoised("accelerate_clean", sd, None, lambda: _clean_for_safetensors(sd, id_storage))
    run.anchor_name = "accelerate.utils.modeling.id_tensor_storage"
    run.anchor = list(anchor)
    run.logs.extend(logs)
    if len(out) < len(sd):
        run.notes.append(
            "dropped names are not in the file: they come back only if the model re-creates "
            "them (the same tie or view) before loading"
        )
    return dict(out)


_ORDERED_NOTE = (
    "accelerate.utils.save de-duplicates only an OrderedDict (what model.state_dict() "
    "returns); a plain dict goes to safetensors as it is, and save_file refuses shared tensors"
)
_PLAIN_NOTE = (
    "a plain dict: accelerate.utils.save de-duplicates only an OrderedDict, so this dict goes to "
    "safetensors' save_file as it is (an OrderedDict would keep only the first name of each storage)"
)


def evaluate_accelerate_save(sd: dict[str, Any], ordered: bool, memo: dict | None = None) -> Run:
    """``accelerate.utils.save(state_dict, path, safe_serialization=True)``.

    accelerate only de-duplicates an ``OrderedDict`` (what ``model.state_dict()`` returns); a
    plain ``dict`` goes to safetensors as it is.
    """
    run = Run(tuple(sd))
    run.notes.append(_ORDERED_NOTE if ordered else _PLAIN_NOTE)
    with _library_failure(run):
        cleaned = _accelerate_clean(run, sd) if ordered else dict(sd)
        if len(cleaned) < len(sd):
            run.notes.append("accelerate deletes the names it drops from the very dict you pass (in place)")
        if not ordered:
            _anchor(run, sd, _ST, "_find_shared_tensors", memo)
        _save_file_into(run, cleaned, {"format": "pt"})
    run.dropped = _dropped(run, sd)
    return run


_META_MESSAGE = "You can't save the model since some parameters are on the meta device."


def evaluate_accelerator_save_model(sd: dict[str, Any], has_meta_parameters: bool) -> Run:
    """``Accelerator().save_model(model, directory)`` (safetensors, the default)."""
    run = Run(tuple(sd))
    if has_meta_parameters:
        run.error = ("RuntimeError", _META_MESSAGE)
        return run
    with _library_failure(run):
        cleaned = _accelerate_clean(run, sd)
        for filename, names in _shards(cleaned, "model{suffix}.safetensors", "10GB").items():
            _save_file_into(run, {k: cleaned[k] for k in names}, {"format": "pt"})
            run.files[-1] = (filename,) + run.files[-1][1:]
    run.dropped = _dropped(run, sd)
    return run
