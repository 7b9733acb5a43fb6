"""Training checkpoints read as such: optimizer state named after parameters, every tensor a category.

A ``.pt`` saved as ``{"model": m.state_dict(), "optimizer": opt.state_dict(), ...}`` (or
Lightning's ``{"state_dict": ..., "optimizer_states": [...]}``) holds its optimizer state as
``optimizer.state.<index>.<key>``: the index is the parameter's place in the optimizer's
``param_groups`` (``opt.state_dict()`` numbers them in that order). The walker's names
(:mod:`tensorviz.sources.formats.ckpt_walk`) are renamed ``optimizer.<param name>.<key>`` through, in
this order of trust:

1. the ``param_names`` torch saves beside each group's ``params`` when the optimizer was built
   from ``named_parameters()``;
2. else the model state dict beside it, when the order is unambiguous: one parameter group, as
   many parameters as the state dict holds tensors (less tied copies, which share their record,
   and BatchNorm's buffers), and every state tensor shaped like its parameter (or factored from
   it, as Adafactor's row and column variances are);
3. else the names stay, and ``metadata["training"]`` says why they could not be mapped.

Only the loaded (``weights_only=True``) object's structure and tensor metadata are read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from tensorviz.core.facts import OptimizerMapping, TrainingFacts

__all__ = ["CheckpointTraining", "checkpoint_training"]

MODEL_KEYS = ("model", "state_dict", "model_state_dict", "module", "model_state", "net", "network")
COPY_WORDS = ("ema", "swa", "averaged", "shadow", "master")
BUFFER_SUFFIXES = (".running_mean", ".running_var", ".num_batches_tracked")


@dataclass(frozen=True)
class CheckpointTraining:
    """Renames ``{walker name: new name}``, categories ``{new name: category}`` and facts per
    optimizer found: ``{prefix: {"mapped_by": "param_names" | "model order" | "", "why_not": str,
    "model": the model key used or ""}}``."""

    renames: dict[str, str] = field(default_factory=dict)
    categories: dict[str, str] = field(default_factory=dict)
    optimizers: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def facts(self) -> TrainingFacts:
        """The typed facts of what was found (``layout.facts.training``)."""
        optimizers = {prefix: OptimizerMapping(**m) for prefix, m in self.optimizers.items()}
        return TrainingFacts(notes=tuple(self.notes), optimizers=optimizers)


def is_optimizer_state(value: Any) -> bool:
    """True for what ``Optimizer.state_dict()`` returns: ``{"state": {...}, "param_groups": [...]}``."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("state"), Mapping)
        and isinstance(value.get("param_groups"), Sequence)
        and all(isinstance(g, Mapping) and isinstance(g.get("params"), Sequence) for g in value["param_groups"])
    )


def _optimizers(obj: Mapping) -> list[tuple[str, Mapping]]:
    """``(name prefix, optimizer state dict)`` for each optimizer state at the top level or in a
    top-level list (Lightning's ``optimizer_states``)."""
    out = []
    for k, v in obj.items():
        if not isinstance(k, str):
            continue
        if is_optimizer_state(v):
            out.append((k, v))
        elif isinstance(v, (list, tuple)):
            out.extend((f"{k}.{j}", s) for j, s in enumerate(v) if is_optimizer_state(s))
    return out


def category_of_key(key: str) -> str:
    """The category of a top-level entry of a training checkpoint, by its key.

    >>> [category_of_key(k) for k in ("model", "ema", "optimizer", "lr_scheduler")]
    ['weights', 'copies', 'other', 'other']
    """
    low = key.lower()
    if any(w in low for w in COPY_WORDS):
        return "copies"
    return "weights" if key in MODEL_KEYS else "other"


#: A model tensor as the order mapping sees it: (name, shape, identity: equal for tied copies).
ModelEntry = tuple[str, tuple[int, ...], Any]


def looks_like_training(obj: Any) -> bool:
    """A mapping with no tensor at its top and an optimizer state or a known model key (cheap)."""
    if not isinstance(obj, Mapping) or any(isinstance(v, torch.Tensor) for v in obj.values()):
        return False
    return is_optimizer_state(obj) or any(isinstance(obj.get(k), Mapping) for k in MODEL_KEYS) or bool(_optimizers(obj))


def tensor_entries(tensors: list[tuple[str, torch.Tensor]], prefix: str) -> list[ModelEntry]:
    """The model's tensors under ``prefix`` (a top-level key) as order-mapping entries."""
    out = []
    for name, t in tensors:
        if name.startswith(prefix + "."):
            st = t.untyped_storage()
            ident = (st.data_ptr() if st.nbytes() else id(st), t.storage_offset(), t.stride(), t.dtype)
            out.append((name[len(prefix) + 1 :], tuple(t.shape), ident))
    return out


def checkpoint_training(
    obj: Any, tensors: list[tuple[str, torch.Tensor]], beside: tuple[str, list[ModelEntry], str] | None = None
) -> CheckpointTraining:
    """How to name and categorise a loaded checkpoint's tensors (``tensors``: the walker's names).

    ``beside`` is a model in another file of the same folder (accelerate's ``save_state``):
    ``(file name, its tensors in their saved order, why that order is not the model's or "")``,
    for a file that holds an optimizer state dict alone. Returns an empty record for anything
    that is not a training checkpoint: a plain state dict keeps its names, uncategorised.
    """
    if not looks_like_training(obj):
        return CheckpointTraining()
    if is_optimizer_state(obj):  # a file of its own (accelerate's optimizer.bin)
        result = CheckpointTraining()
        model_name, entries, unordered = beside or ("", [], "")
        result.optimizers[""] = _map_optimizer("", obj, model_name, entries, result.renames, unordered)
        result.categories.update((result.renames.get(n, n), "optimizer") for n, _ in tensors)
        return result
    optimizers = _optimizers(obj)
    model_key = next((k for k in MODEL_KEYS if isinstance(obj.get(k), Mapping)), "")
    result = CheckpointTraining()
    model = tensor_entries(tensors, model_key) if model_key else []
    for prefix, state in optimizers:
        result.optimizers[prefix] = _map_optimizer(prefix, state, model_key, model, result.renames)
    optim_prefixes = tuple(p + "." for p, _ in optimizers)
    buffers = _deepspeed_buffers(obj, model_key, result.notes)
    for name, _ in tensors:
        new = result.renames.get(name, name)
        top = name.split(".", 1)[0]
        if name.startswith(optim_prefixes):
            result.categories[new] = "optimizer"
        elif name in buffers or (
            buffers is _NO_NAMES and name.endswith(BUFFER_SUFFIXES) and category_of_key(top) == "weights"
        ):
            result.categories[new] = "buffers"
        else:
            result.categories[new] = category_of_key(top)
    return result


_NO_NAMES: frozenset[str] = frozenset()


def _deepspeed_buffers(obj: Mapping, model_key: str, notes: list[str]) -> frozenset[str]:
    """A DeepSpeed model states file (``mp_rank_XX_model_states.pt``) names its buffers
    (``buffer_names``) and its parameters per group (``param_shapes``), and maps each tied name
    to the one it shares (``shared_params``); the optimizer state is in the per-rank
    ``*_optim_states.pt`` files. Returns the buffer names (under ``model_key``)."""
    names = obj.get("buffer_names")
    shapes = obj.get("param_shapes")
    if not isinstance(names, (list, tuple)) or not isinstance(shapes, (list, tuple)):
        return _NO_NAMES
    n = sum(len(g) for g in shapes if isinstance(g, Mapping))
    shared = obj.get("shared_params")
    ties = ", ".join(f"{a} -> {b}" for a, b in list(shared.items())[:4]) if isinstance(shared, Mapping) else ""
    notes.append(
        f"DeepSpeed model states (ds_version {obj.get('ds_version', '?')}): {n} parameters in "
        f"{len(shapes)} group(s), {len(names)} buffers"
        + (f"; shared: {ties}" if ties else "")
        + "; the optimizer state (ZeRO) is in the *_optim_states.pt files beside it"
    )
    return frozenset(f"{model_key}.{b}" for b in names if isinstance(b, str))


def _map_optimizer(
    prefix: str, state: Mapping, model_key: str, model: list[ModelEntry], renames: dict[str, str], unordered: str = ""
) -> dict[str, str]:
    """Rename one optimizer's state views after their parameters; its facts."""
    groups = state["param_groups"]
    indices = [i for g in groups for i in g["params"]]
    names = _saved_names(groups)
    how, why = "param_names", ""
    if names is None and unordered:
        how, why = "", f"no saved param_names, and {unordered}"
    elif names is None:
        names, why = _by_model_order(groups, indices, state["state"], model_key, model)
        how = "model order" if names is not None else ""
    if names is not None:
        pre = f"{prefix}." if prefix else ""
        for index, name in zip(indices, names):
            for key, value in state["state"].get(index, {}).items():
                if isinstance(value, torch.Tensor):
                    renames[f"{pre}state.{index}.{key}"] = f"{pre}{name}.{key}"
    return {"mapped_by": how, "why_not": why, "model": model_key if how == "model order" else ""}


def _saved_names(groups: Sequence[Mapping]) -> list[str] | None:
    names: list[str] = []
    for g in groups:
        saved = g.get("param_names")
        if (
            not isinstance(saved, Sequence)
            or len(saved) != len(g["params"])
            or not all(isinstance(n, str) for n in saved)
        ):
            return None
        names.extend(saved)
    return names


def _by_model_order(
    groups: Sequence[Mapping], indices: list, state: Mapping, model_key: str, model: list[ModelEntry]
) -> tuple[list[str] | None, str]:
    """Parameter names by the model state dict's order, or None and why that order is not safe."""
    if not model_key:
        return (
            None,
            "no saved param_names (the optimizer was built from parameters()) and no model state dict beside it",
        )
    if len(groups) != 1:
        return None, (
            f"no saved param_names and {len(groups)} parameter groups: a group's parameters need not "
            f"be in the model's order"
        )
    params, dropped = _parameter_candidates(model)
    if len(params) != len(indices):
        return None, (
            f"no saved param_names, and the optimizer numbers {len(indices)} parameters while "
            f"{model_key!r} holds {len(params)} tensors that could be parameters ({dropped}); which "
            f"state belongs to which cannot be told"
        )
    for index, (name, shape) in zip(indices, params):
        for key, value in state.get(index, {}).items():
            if isinstance(value, torch.Tensor) and value.dim() and not _shaped_like(value.shape, shape):
                return None, (
                    f"no saved param_names, and by the order of {model_key!r} state {index} ({key}, shape "
                    f"{tuple(value.shape)}) would belong to {name} (shape {shape}): the order is "
                    f"not the optimizer's"
                )
    return [n for n, _ in params], ""


def _parameter_candidates(model: list[ModelEntry]) -> tuple[list[tuple[str, tuple]], str]:
    """The model's tensors that can be parameters, in order: tied copies (the same bytes read
    the same way) and BatchNorm's buffers left out; and words for what was left out."""
    seen: set[tuple] = set()
    out, tied, buffers = [], 0, 0
    for name, shape, ident in model:
        if name.endswith(BUFFER_SUFFIXES):
            buffers += 1
            continue
        if (ident, shape) in seen:
            tied += 1
            continue
        seen.add((ident, shape))
        out.append((name, shape))
    return out, f"{tied} tied cop{'y' if tied == 1 else 'ies'} and {buffers} BatchNorm buffer(s) left out"


def _shaped_like(state: torch.Size, param: tuple[int, ...]) -> bool:
    """A state tensor is its parameter's shape, or factored from it (each dim equal or 1)."""
    return len(state) == len(param) and all(a in (b, 1) for a, b in zip(state, param))
