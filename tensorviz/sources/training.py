"""Training state of a live model: its optimizer's state and its gradients, named after parameters.

``tv.analyze(model, optimizer=opt)`` lays out, after the model's own tensors, each parameter's
gradient as ``<param>.grad`` and each optimizer state tensor as
``optimizer.<param name>.<state key>``. The state is mapped to parameters through the optimizer's
own ``param_groups`` order (the order ``opt.state_dict()`` numbers them in) and the parameters'
identity: a tied parameter is one object, so it has one state, named after its first name.

Wrappers are unwrapped to the optimizer that holds the state: ``ZeroRedundancyOptimizer``'s local
``optim`` (this rank's partition only), accelerate's ``AcceleratedOptimizer.optimizer``,
Lightning's ``LightningOptimizer._optimizer``. Whatever the state is made of -- separate tensors
(SGD, Adam, fused and foreach alike), views of a flat buffer, FSDP2's sharded DTensors -- each is
shown as the view it is: the collector reads its storage, offset, shape and stride as for any
tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from tensorviz.core.facts import TrainingFacts
from tensorviz.core.rows import Field, Rows

__all__ = ["TrainingState", "training_state", "add_training", "categorise_module"]

OPTIMIZER_PREFIX = "optimizer."


@dataclass(frozen=True)
class TrainingState:
    """What :func:`training_state` found: named gradients and optimizer state, and facts.

    ``optimizer`` is the class name of the optimizer holding the state (``"Adam"``), ``wrapper``
    the wrapper's (``"ZeroRedundancyOptimizer"``) or "", ``notes`` sentences about what is shown
    (a partition, parameters the model does not have).
    """

    grads: tuple[tuple[str, Any], ...]
    state: tuple[tuple[str, Any], ...]
    optimizer: str
    wrapper: str
    notes: tuple[str, ...]


def unwrap(optimizer: Any) -> tuple[Any, str]:
    """The optimizer that holds the state, and the wrapper's class name ("" for none).

    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    >>> unwrap(opt)[1]
    ''
    """
    for attr in ("optim", "optimizer", "_optimizer"):
        inner = getattr(optimizer, attr, None)
        if inner is not optimizer and isinstance(inner, torch.optim.Optimizer):
            return unwrap(inner)[0], type(optimizer).__name__
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer= takes a torch.optim.Optimizer (or a ZeroRedundancyOptimizer, accelerate or "
            f"Lightning wrapper of one); got a {type(optimizer).__module__}.{type(optimizer).__qualname__}"
        )
    return optimizer, ""


def param_names(model: torch.nn.Module) -> dict[int, str]:
    """{id(parameter): its first name}; a tied parameter is one object under its first name."""
    names: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), name)
    return names


def state_owners(optimizer: torch.optim.Optimizer, names: dict[int, str]) -> Iterator[tuple[Any, str]]:
    """``(parameter, name)`` in ``param_groups`` order, the order ``state_dict()`` numbers them.

    A parameter the model does not have is named by its place: ``param_groups.<g>.<i>``, or by the
    optimizer's own ``param_names`` when it was built from ``named_parameters()``.
    """
    for g, group in enumerate(optimizer.param_groups):
        saved = group.get("param_names")
        for i, p in enumerate(group["params"]):
            name = names.get(id(p))
            if name is None:
                name = saved[i] if saved and i < len(saved) else f"param_groups.{g}.{i}"
            yield p, name


def training_state(model: torch.nn.Module, optimizer: Any = None, *, grad: bool = True) -> TrainingState:
    """The gradients (if ``grad``) and the optimizer state of ``model``, named; nothing is copied.

    >>> m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    >>> m(torch.ones(1, 2)).sum().backward(); opt.step()
    >>> s = training_state(m, opt)
    >>> [n for n, _ in s.grads], [n for n, _ in s.state], s.optimizer
    (['weight.grad', 'bias.grad'], ['optimizer.weight.momentum_buffer', 'optimizer.bias.momentum_buffer'], 'SGD')
    """
    names = param_names(model)
    grads: list[tuple[str, Any]] = []
    if grad:
        seen: set[int] = set()
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) not in seen and p.grad is not None:
                seen.add(id(p))
                grads.append((f"{name}.grad", p.grad))
    if optimizer is None:
        return TrainingState(tuple(grads), (), "", "", ())
    inner, wrapper = unwrap(optimizer)
    state, notes = _state_items(inner, names)
    if wrapper == "ZeroRedundancyOptimizer":
        rank = getattr(optimizer, "rank", "?")
        notes.insert(0, f"ZeroRedundancyOptimizer: only rank {rank}'s partition of the optimizer state is here")
    return TrainingState(tuple(grads), tuple(state), type(inner).__name__, wrapper, tuple(notes))


def _state_items(optimizer: torch.optim.Optimizer, names: dict[int, str]) -> tuple[list, list[str]]:
    """Each state value as ``(optimizer.<param>.<key>, value)``, in ``param_groups`` order."""
    items: list[tuple[str, Any]] = []
    notes: list[str] = []
    state = optimizer.state
    done: set[int] = set()
    outside = 0
    for p, name in state_owners(optimizer, names):
        done.add(id(p))
        outside += id(p) not in names
        for key, value in state.get(p, {}).items():
            items.append((f"{OPTIMIZER_PREFIX}{name}.{key}", value))
    orphans = [(p, s) for p, s in state.items() if id(p) not in done]
    for k, (_, s) in enumerate(orphans):  # state of a parameter no longer in any group
        for key, value in s.items():
            items.append((f"{OPTIMIZER_PREFIX}orphan.{k}.{key}", value))
    if outside:
        notes.append(f"{outside} optimizer parameter(s) are not parameters of this model; named by their place")
    if orphans:
        notes.append(f"{len(orphans)} state entr(ies) belong to no parameter group; named optimizer.orphan.<k>")
    return items, notes


def categorise_module(rows: Rows, buffers: tuple[str, ...]) -> None:
    """A module's rows are weights, except its buffers."""
    rows.category = "weights"
    if buffers:
        wanted = set(buffers)
        pieces = rows.pieces  # a tensor subclass's inner tensors: the category of what they are part of
        for i, row in enumerate(rows.rows):
            if (pieces[i].of if i in pieces else row[Field.NAME]) in wanted:
                rows.categories[i] = "buffers"


def add_training(
    add: Callable[[str, Any], None], rows: Rows, model: torch.nn.Module, optimizer: Any, grad: bool
) -> TrainingFacts:
    """Add (with the collector's ``add``) the gradients and the optimizer state after the
    model's rows, each row with its category; returns their facts."""
    state = training_state(model, optimizer, grad=grad)
    rows.unique = False  # "<param>.grad" could repeat a name the model already has
    for items, category in ((state.grads, "gradients"), (state.state, "optimizer")):
        first = len(rows.rows)
        for name, value in items:
            add(name, value)
        rows.categories.update(dict.fromkeys(range(first, len(rows.rows)), category))
    return TrainingFacts(optimizer=state.optimizer, wrapper=state.wrapper, notes=state.notes)


def name_training_state(rows: Rows, obj: Mapping, leaves: Iterable[tuple[str, Any]]) -> TrainingFacts | None:
    """A live training checkpoint dict (``{"model": ..., "optimizer": opt.state_dict()}``) named
    and categorised as its saved file would be (:mod:`tensorviz.sources.ckpt_training`): rows
    renamed in place, categories set; returns the optimizer facts, or None. ``leaves``: the
    ``(name, value)`` pairs the collector named (:func:`tensorviz.sources.live.iter_named_values`)."""
    from tensorviz.sources.ckpt_training import checkpoint_training, looks_like_training

    if not looks_like_training(obj):
        return None
    tensors = [(n, t) for n, t in leaves if isinstance(t, torch.Tensor)]
    found = checkpoint_training(obj, tensors)
    if not found.categories:
        return None
    renames, cats = found.renames, found.categories
    for i, row in enumerate(rows.rows):
        name = renames.get(row[Field.NAME], row[Field.NAME])
        if name != row[Field.NAME]:
            rows.rows[i] = (name, *row[Field.NAME + 1 :])
        if name in cats:
            rows.categories[i] = cats[name]
    if not found.optimizers and not found.notes:
        return None
    return found.facts()
