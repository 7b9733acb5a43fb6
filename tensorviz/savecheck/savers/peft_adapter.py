"""What ``PeftModel.save_pretrained(directory)`` would do: the adapter weights only.

Replayed step by step as peft writes them (peft/peft_model.py, ``PeftModel.save_pretrained``,
0.1x to 0.21, safetensors path): for each adapter, ``get_peft_model_state_dict`` picks the
adapter's tensors and drops the adapter name from their keys; names sharing a storage (peft's
``id_tensor_storage``) are cloned after the first; non-contiguous ones are made contiguous;
``save_file`` writes ``adapter_model.safetensors`` (``ADAPTER/adapter_model.safetensors`` for an
adapter not named "default"). ``get_peft_model_state_dict`` runs on meta twins (real tensors
without data, so peft's own code may call any torch op on them); its outputs are mapped back
to stand-ins. Prompt-learning adapters save embeddings computed from data: "could not evaluate".

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import torch

from tensorviz.savecheck.savers.common import (
    Run,
    Unavailable,
    _helper,
    _library_failure,
    _only_standins,
    _save_file_into,
)
from tensorviz.savecheck.standin import StandIn, from_meta

__all__ = ["is_peft_model", "evaluate_peft_save_pretrained"]

_FILE = "adapter_model.safetensors"
_BASE_NOTE = (
    "PeftModel.save_pretrained writes the adapter only: the base model's weights are not in the file, "
    "PeftModel.from_pretrained(base_model, directory) takes them from the base model"
)


def is_peft_model(obj: Any) -> bool:
    """A peft ``PeftModel`` (peft is imported only if the caller already did)."""
    mod = sys.modules.get("peft")
    cls = getattr(mod, "PeftModel", None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def evaluate_peft_save_pretrained(model: Any, sd: dict[str, Any]) -> Run:
    """``peft_model.save_pretrained(directory)`` (safetensors, every adapter)."""
    run = Run(tuple(sd))
    _only_standins(sd, "PeftModel.save_pretrained")
    get_state = _helper("peft.utils.save_and_load", "get_peft_model_state_dict")
    id_storage = _helper("peft.utils.other", "id_tensor_storage")
    metas: dict[int, Any] = {}
    twins = {k: v.meta_twin(metas) for k, v in sd.items()}
    owners: dict[int, list[str]] = collections.defaultdict(list)
    for k, twin in twins.items():
        owners[torch._C._storage_id(twin)].append(k)  # type: ignore[attr-defined]  # torch's stubs omit it
    used: set[str] = set()
    with _library_failure(run):
        for adapter, config in model.peft_config.items():
            if getattr(config, "is_prompt_learning", False):
                raise Unavailable(f"adapter {adapter!r} is prompt learning: peft saves embeddings computed from data")
            try:
                out = get_state(model, state_dict=twins, adapter_name=adapter)
            except Exception as e:  # noqa: BLE001 - peft's own step failed on data-free twins
                raise Unavailable(f"get_peft_model_state_dict failed without data ({type(e).__name__}: {e})") from None
            state = _mapped(run, out, sd, owners, used)
            state = _unaliased(state, id_storage)
            prefix = "" if adapter == "default" else f"{adapter}/"
            _save_file_into(run, {prefix + k: v for k, v in state.items()}, {"format": "pt"})
            # the file is <adapter>/adapter_model.safetensors; its header names carry no prefix
            run.files[-1] = (prefix + _FILE, dict(state), run.files[-1][2])
    if run.error is None:
        run.carried.extend(sorted(used))
        run.ignored.extend(k for k in sd if k not in used and k not in run.written)
        if run.ignored:
            run.notes.append(_BASE_NOTE)
    return run


def _mapped(run: Run, out: dict[str, Any], sd: dict[str, Any], owners, used: set[str]) -> dict[str, Any]:
    """peft's output (meta twins) as stand-ins of the given storages; renames recorded."""
    state = {}
    for name, t in out.items():
        if not isinstance(t, torch.Tensor) or t.device.type != "meta":
            raise Unavailable(f"get_peft_model_state_dict returned {type(t).__name__} for {name!r}")
        names = owners.get(torch._C._storage_id(t), [])  # type: ignore[attr-defined]  # torch's stubs omit it
        source = names[0] if names else ""
        storage = sd[source].untyped_storage() if source else None
        device = sd[source].device if source else torch.device("cpu")
        state[name] = from_meta(t, storage, device, source or name)
        if source:
            used.add(source)
            if source != name:
                run.renamed.append((source, name))
    return state


def _unaliased(state: dict[str, Any], id_storage: Any) -> dict[str, Any]:
    """peft's own alias step: every name after the first on one storage is cloned; then each
    non-contiguous tensor is made contiguous."""
    ptrs: dict[Any, list[str]] = collections.defaultdict(list)
    for name, t in state.items():
        ptrs[id_storage(t) if isinstance(t, StandIn) else id(t)].append(name)
    for names in ptrs.values():
        for name in names[1:]:
            state[name] = state[name].clone()
    return {k: v if v.is_contiguous() else v.contiguous() for k, v in state.items()}
