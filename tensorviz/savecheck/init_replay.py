"""What ``from_pretrained`` does with a name the model ignores on save: the model's own
``_init_weights`` replayed on a meta twin of the module that holds it.

transformers 5 leaves ``_keys_to_ignore_on_save`` out of the file and, on load, runs the model's
``_init_weights`` over the modules whose weights were missing. A name comes back as it was only
where that rebuilds it deterministically (Marian's sinusoidal positions: ``copy_`` of a computed
table); a random initialiser (``normal_``, ``uniform_``...) re-initialises it, and a name
``_init_weights`` does not touch keeps the value ``__init__`` gave it. The replay runs on a copy
whose tensors are meta twins (no data read, the user's module untouched), recording which ops
write the tensor.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["init_rebuild"]

_RANDOM = ("normal", "uniform", "random", "bernoulli", "exponential", "cauchy", "geometric", "log_normal")


class _Writes(TorchDispatchMode):
    """Names of the mutating ops that write a given storage."""

    def __init__(self, storage_id: int) -> None:
        super().__init__()
        self.storage_id = storage_id
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if schema.is_mutable and args and isinstance(args[0], torch.Tensor):
            if torch._C._storage_id(args[0]) == self.storage_id:  # type: ignore[attr-defined]  # torch's stubs omit it
                self.ops.append(func.__name__)
        return func(*args, **kwargs)


def init_rebuild(model: Any, name: str) -> str:
    """``"rebuilt"`` (its last write copies a computed value in), ``"re-initialised"`` (its last
    write is a random or constant initialiser: a trained value is gone), ``"untouched"`` (it keeps
    what ``__init__`` made) or ``"unknown: <why>"``, for a state-dict ``name`` of ``model``."""
    owner_name, _, attr = name.rpartition(".")
    try:
        owner = model.get_submodule(owner_name)
        memo: dict[int, Any] = {}
        for t in [*owner.parameters(recurse=True), *owner.buffers(recurse=True)]:
            twin = torch.empty_like(t, device="meta")
            memo[id(t)] = torch.nn.Parameter(twin, t.requires_grad) if isinstance(t, torch.nn.Parameter) else twin
        twin_module = copy.deepcopy(owner, memo)
        target = getattr(twin_module, attr)
        mode = _Writes(torch._C._storage_id(target))  # type: ignore[attr-defined]  # torch's stubs omit it
        with mode:
            model._init_weights(twin_module)
    except Exception as e:  # noqa: BLE001 - the model's own code: any failure means "cannot tell"
        return f"unknown: replaying _init_weights failed ({type(e).__name__}: {e})"
    if not mode.ops:
        return "untouched"
    last = mode.ops[-1]  # later writes win (Marian: Embedding's normal_, then its own copy_)
    return "rebuilt" if last.startswith("copy_") and not any(r in last for r in _RANDOM) else "re-initialised"
