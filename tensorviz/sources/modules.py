"""What a live ``nn.Module`` says about its names besides tensors: its submodules' classes and
which names are buffers (and which of those ``state_dict`` leaves out).

Recorded by the collector in ``layout.metadata["modules"]`` for :mod:`tensorviz.core.tree`.
Reads module structure only (no tensor data).
"""

from __future__ import annotations

from typing import Any

import torch

from tensorviz.sources.distributed.fsdp_units import gathered_to_sharded

__all__ = ["module_facts"]


def module_facts(module: torch.nn.Module) -> dict[str, Any]:
    """``{"classes": {prefix: class name}, "buffers": names, "not_saved": names}``.

    Prefixes are submodule names as ``named_modules`` gives them ("" is the model itself); a
    submodule reachable under two names is listed under both.

    >>> facts = module_facts(torch.nn.BatchNorm1d(3))
    >>> facts["classes"], facts["buffers"], facts["not_saved"]
    ({'': 'BatchNorm1d'}, ('running_mean', 'running_var', 'num_batches_tracked'), ())
    """
    classes = {name: type(m).__name__ for name, m in module.named_modules(remove_duplicate=False)}
    buffers = tuple(name for name, b in module.named_buffers(remove_duplicate=False) if b is not None)
    saved = _saved_names(module) if buffers else ()
    return {"classes": classes, "buffers": buffers, "not_saved": tuple(n for n in buffers if n not in saved)}


def _saved_names(module: torch.nn.Module) -> Any:
    """The names ``state_dict`` writes. Mid-step under FSDP2 (units gathered) ``state_dict()``
    would reshard the model, so the persistent buffers are read from each module instead."""
    if not gathered_to_sharded(module):
        return module.state_dict(keep_vars=True).keys()
    return {
        f"{path}.{n}" if path else n
        for path, m in module.named_modules(remove_duplicate=False)
        for n, _ in m.named_buffers(recurse=False, remove_duplicate=False)
        if n not in m._non_persistent_buffers_set
    }
