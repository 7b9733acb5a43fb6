"""FSDP2's physical side on this rank: each unit's sharded parameter storage and what it re-gathers.

An FSDP2 *unit* is one parameter group of a module wrapped by ``fully_shard`` (an
``FSDPModule``). For each unit this rank describes, from metadata only:

- its **sharded parameter storage**: every parameter keeps its local shard at the start of a
  padded storage (FSDP2 pads each rank's shard to ``ceil(rows / world)`` rows, so padded bytes
  are the same on every rank); which parameter's shard lies where (byte offset);
- its **unsharded size**: the bytes the all-gather re-gathers for forward and backward (padded:
  ``padded shard numel x world x itemsize`` of the all-gather dtype, or the all-gather outputs'
  own sizes once they exist), and what those outputs hold *now*: never allocated (no step yet),
  gathered, or freed (storage resized to 0 bytes, as FSDP2 leaves them between steps);
- **reshard_after_forward**: whether the unit is freed after forward and therefore re-gathered
  in backward (``True``), kept gathered until backward (``False``), or kept as a smaller shard
  (an ``int``: the post-forward shard world size).

Everything is read from FSDP2's private attributes (``torch.distributed.fsdp._fully_shard``:
``FSDPState._fsdp_param_groups``, ``FSDPParamGroup.fsdp_params``, ``FSDPParam._sharded_param_data``,
``all_gather_outputs`` ...). A torch version without one of them gives no units and the reason
(:data:`UNAVAILABLE`); nothing is patched, called for effect or read as data.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import torch

from tensorviz.sources.distributed.fsdp_facts import fsdp_record

__all__ = ["UNAVAILABLE", "describe_units", "gathered_to_sharded", "module_values", "local_record"]

#: Why the physical side is missing, with the attribute torch lacks filled in.
UNAVAILABLE = (
    "FSDP2's sharded and unsharded parameter storages are not shown: torch {version} has no {what} "
    "(tensorviz reads FSDP2's private attributes; the global layout above is unaffected)"
)


def describe_units(obj: Any) -> tuple[list[dict], list[int], str | None]:
    """``(units, local shard bytes per unit, why not)`` for the FSDP2 units of ``obj`` on this rank.

    ``units`` is the same on every rank of one FSDP2 job (padded sizes do not depend on the
    rank), so the exchange sends it once; the local shard bytes differ by rank (uneven shards).
    A unit is ``{"module", "state", "reshard_after_forward", "note", "world", "storages":
    [padded nbytes, ...], "params": [{"names", "storage", "offset", "padded", "gathered",
    "now", "dtype"}, ...]}`` (bytes; ``now`` is None before the first all-gather).
    """
    fsdp_module = _fsdp_module_class()
    if fsdp_module is None or not isinstance(obj, torch.nn.Module):
        return [], [], None
    modules = [(n, m) for n, m in obj.named_modules() if isinstance(m, fsdp_module)]
    return read_units(obj, modules) if modules else ([], [], None)


def _fsdp_module_class() -> type | None:
    """``FSDPModule`` when FSDP2 is in use (imported), else None: no import paid for a plain model."""
    fsdp = sys.modules.get("torch.distributed.fsdp")
    return getattr(fsdp, "FSDPModule", None)


def read_units(obj: torch.nn.Module, modules: list) -> tuple[list[dict], list[int], str | None]:
    """:func:`describe_units` of the ``(name, FSDPModule)`` pairs; the reason when torch lacks an attribute."""
    try:
        return _units(obj, modules)
    except AttributeError as err:
        return [], [], UNAVAILABLE.format(version=torch.__version__, what=_missing(err))


def _missing(err: AttributeError) -> str:
    name = getattr(err, "name", None)
    owner = type(getattr(err, "obj", None)).__name__
    return f"{owner}.{name}" if name else str(err)


def _units(obj: torch.nn.Module, modules: list) -> tuple[list[dict], list[int], None]:
    names: dict[int, str] = {}
    for n, m in obj.named_modules(remove_duplicate=False):
        names.setdefault(id(m), n)
    units, local, seen = [], [], set()
    for _, module in modules:
        state = module._get_fsdp_state()
        if id(state) in seen:  # fully_shard([a, b]): one state for several modules
            continue
        seen.add(id(state))
        groups = getattr(state, "_fsdp_param_groups", None)
        if groups is None:  # torch before param groups became a list
            groups = [state._fsdp_param_group] if state._fsdp_param_group is not None else []
        for group in groups:
            unit, nbytes = _unit(group, state, names, module is obj)
            units.append(unit)
            local.append(nbytes)
    return units, local, None


def _unit(group: Any, state: Any, names: dict[int, str], is_obj: bool) -> tuple[dict, int]:
    """One parameter group: its record and this rank's local shard bytes."""
    world = int(getattr(group.mesh_info, "shard_mesh_size", 1))
    storages: dict[Any, int] = {}
    sizes: list[int] = []
    params, local = [], 0
    for fp in group.fsdp_params:
        shard = fp.sharded_param._local_tensor
        data = fp._sharded_param_data
        st = data.untyped_storage()
        key = st.data_ptr() or st._cdata  # meta tensors have no address
        if key not in storages:
            storages[key] = len(sizes)
            sizes.append(st.nbytes())
        params.append(_param(fp, storages[key], shard, data, world, names))
        local += shard.numel() * shard.element_size()
    raf, note = _reshard_after_forward(group, state, is_obj)
    unit = {
        "module": _module_name(group, names),
        "state": str(group._sharded_state.name).lower().replace("_", " "),
        "reshard_after_forward": raf,
        "note": note,
        "world": world,
        "storages": sizes,
        "params": params,
    }
    return unit, local


def _param(fp: Any, storage: int, shard: torch.Tensor, data: torch.Tensor, world: int, names: dict) -> dict:
    """One parameter's place in its sharded storage and the bytes its all-gather output holds."""
    outputs = list(fp.all_gather_outputs)
    dtype = getattr(fp, "param_dtype", None) or getattr(fp, "orig_dtype", None) or _policy_dtype(fp) or data.dtype
    if outputs:  # allocated by the first all-gather: their sizes are the truth
        gathered = sum(t.numel() * t.element_size() for t in outputs)
        now = sum(t.untyped_storage().nbytes() for t in outputs)
        dtype = outputs[0].dtype
    else:
        gathered = data.numel() * world * torch.empty((), dtype=dtype).element_size()
        now = None
    return {
        "names": _param_names(fp, names),
        "storage": storage,
        "offset": shard.storage_offset() * shard.element_size(),  # bytes into its storage
        "padded": data.numel() * data.element_size(),
        "gathered": int(gathered),
        "now": None if now is None else int(now),
        "dtype": str(dtype).removeprefix("torch."),
    }


def _policy_dtype(fp: Any) -> torch.dtype | None:
    """The all-gather dtype before FSDP2's lazy init: the mixed-precision policy's param_dtype."""
    return getattr(getattr(fp, "mp_policy", None), "param_dtype", None)


def _param_names(fp: Any, names: dict[int, str]) -> list[str]:
    """Every name of the parameter in the analysed module (a tied parameter has several)."""
    info = fp._module_info
    pairs = [(info.module, info.param_name), *zip(info.shared_modules, info.shared_param_names)]
    out = []
    for module, attr in pairs:
        prefix = names.get(id(module))
        if prefix is not None:
            out.append(f"{prefix}.{attr}" if prefix else attr)
    return out or [str(getattr(fp, "_param_fqn", None) or info.param_name)]


def _module_name(group: Any, names: dict[int, str]) -> str:
    fqn = getattr(group, "_module_fqn", None)
    if fqn is None:  # set at FSDP2's lazy init (the first forward)
        fqn = ", ".join(names.get(id(m), type(m).__name__) for m in group.modules)
    return fqn


def _reshard_after_forward(group: Any, state: Any, is_obj: bool) -> tuple[bool | int, str]:
    """``True`` / ``False`` / the post-forward shard world size, and a note when it is implied."""
    post = group.post_forward_mesh_info
    if post is None:
        return False, ""
    if getattr(state, "_is_root", True) is None and getattr(state, "_auto_reshard_after_forward", False) and is_obj:
        # FSDP2 turns reshard_after_forward off for the root at its lazy init (first forward)
        return (
            False,
            "root: kept gathered after forward (reshard_after_forward=None; FSDP2 sets it at the first forward)",
        )
    if post != group.mesh_info:
        return int(getattr(post, "shard_mesh_size", 1)), ""
    return True, ""


def gathered_to_sharded(obj: Any) -> dict[int, Any]:
    """``{id(gathered parameter): its sharded DTensor}`` for units that are not sharded now
    (mid-step: between forward and backward with ``reshard_after_forward=False``); empty when
    every unit is sharded, or ``obj`` has none.
    """
    fsdp_module = _fsdp_module_class()
    if fsdp_module is None or not isinstance(obj, torch.nn.Module):
        return {}
    swap: dict[int, Any] = {}
    try:
        for module in obj.modules():
            if isinstance(module, fsdp_module):
                for group in getattr(module._get_fsdp_state(), "_fsdp_param_groups", ()):  # type: ignore[operator]  # FSDPModule method; torch types Module.__getattr__ as Tensor | Module
                    if group._sharded_state.name != "SHARDED":
                        swap.update(_swaps(group))
    except AttributeError:
        return {}
    return swap


def _swaps(group: Any) -> dict[int, Any]:
    out = {}
    for fp in group.fsdp_params:
        for attr in ("_unsharded_param", "_sharded_post_forward_param"):
            p = getattr(fp, attr, None)
            if p is not None:
                out[id(p)] = fp.sharded_param
    return out


def fsdp_mid_step_state(module: torch.nn.Module) -> dict[str, Any] | None:
    """What ``module.state_dict(keep_vars=True)`` would return, made without calling it, for an
    FSDP2 model mid-step (see :func:`gathered_to_sharded`); None for any other module."""
    swap = gathered_to_sharded(module)
    if not swap:
        return None
    skip = {
        f"{path}.{n}" if path else n
        for path, m in module.named_modules(remove_duplicate=False)
        for n in getattr(m, "_non_persistent_buffers_set", ())
    }
    return {name: value for name, value in module_values(module, swap) if name not in skip}


def module_values(module: torch.nn.Module, swap: dict[int, Any]) -> Iterator[tuple[str, Any]]:
    """A module's parameters and buffers in ``state_dict`` order, each gathered FSDP2 parameter
    swapped for its sharded DTensor (``swap``: :func:`gathered_to_sharded`).

    What ``state_dict(keep_vars=True)`` gives, without calling it: mid-step, FSDP2's pre-save
    hook would reshard the model, freeing the gathered storages the coming backward needs.
    (Non-persistent buffers come in order here; the collector lists them either way.)
    """
    for path, m in module.named_modules(remove_duplicate=False):
        pre = f"{path}." if path else ""
        for n, p in m.named_parameters(recurse=False, remove_duplicate=False):
            yield pre + n, swap.get(id(p), p)
        for n, b in m.named_buffers(recurse=False, remove_duplicate=False):
            yield pre + n, b


def local_record(obj: Any) -> dict | None:
    """``metadata["fsdp"]`` of a one-process layout (``tv.analyze(model)`` on one rank): this
    rank's units and totals (see :mod:`tensorviz.core.fsdp`), or None without FSDP2 units."""
    units, local, why = describe_units(obj)
    if not units and not why:
        return None
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    return fsdp_record([([rank], units)], {rank: sum(local)}, {rank: why} if why else {})
