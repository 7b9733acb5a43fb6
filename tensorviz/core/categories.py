"""Training state by category: weights, buffers, gradients, optimizer state, copies, other.

Pure Python (no torch). A view's category comes from its source (:attr:`TensorView.category`);
this module says which layouts are training state, where an optimizer state view belongs in the
model (its parameter's module: ``optimizer.layers.0.attn.q.weight.exp_avg`` is the optimizer
state of module ``layers.0.attn.q``) and how totals read ("weights 1.0 GiB · grads 1.0 GiB ·
Adam 2.0 GiB").

>>> category_words([("weights", 2**30), ("gradients", 2**30), ("optimizer", 2**31)], optimizer="Adam")
'weights 1.0 GiB · grads 1.0 GiB · Adam 2.0 GiB'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from tensorviz.core.facts import TrainingFacts
from tensorviz.core.records import CATEGORIES, LayoutLike
from tensorviz.core.units import format_bytes

__all__ = ["CATEGORIES", "COLOURS", "LABELS", "TRAINING", "category_words", "is_training", "homes", "home_of"]

#: Short words for each category in totals and legends.
LABELS = {
    "weights": "weights",
    "buffers": "buffers",
    "gradients": "grads",
    "optimizer": "optimizer state",
    "copies": "copies (EMA, masters)",
    "other": "other",
}
#: A colour per category when a diagram is coloured by category (Paul Tol's colour-blind-safe
#: "bright" scheme; unclassified views grey).
COLOURS = {
    "weights": "#4477aa",
    "buffers": "#228833",
    "gradients": "#ee6677",
    "optimizer": "#ccbb44",
    "copies": "#66ccee",
    "other": "#aa3377",
    "": "#bbbbbb",
}
#: Categories that only training state has: a layout holding one of them is training state.
TRAINING = ("gradients", "optimizer", "copies", "other")


def is_training(layout: LayoutLike) -> bool:
    """Whether any view is a gradient, optimizer state, a copy or other training state."""
    return layout.facts.training is not None or any(c in TRAINING for c in set(layout.categories))


def category_words(pairs: Iterable[tuple[str, int]], optimizer: str = "") -> str:
    """``category bytes`` joined with " · ", in :data:`CATEGORIES` order, zero totals left out;
    the optimizer's state is named after the optimizer when known."""
    totals = dict(pairs)
    words = []
    for c in (*CATEGORIES, ""):
        if totals.get(c):
            label = optimizer if c == "optimizer" and optimizer else LABELS.get(c, "unclassified")
            words.append(f"{label} {format_bytes(totals[c])}")
    return " · ".join(words)


def optimizer_name(layout: LayoutLike) -> str:
    """The optimizer's class name when the layout came with one (live), else ""."""
    facts = layout.facts.training
    return (facts.optimizer or "") if facts is not None else ""


def homes(layout: LayoutLike) -> dict[str, str]:
    """``{optimizer prefix: model prefix}``: where the parameters an optimizer's state is named
    after live in the layout ("" for a live model's own names)."""
    facts = layout.facts.training
    if facts is None:
        return {}
    if facts.live:
        return {"optimizer": ""}
    return {prefix: m.model for prefix, m in (facts.optimizers or {}).items() if m.mapped_by}


def home_of(name: str, where: Mapping[str, str]) -> str:
    """The module path an optimizer state view belongs to (its parameter's), or "" if none.

    >>> home_of("optimizer.0.weight.exp_avg", {"optimizer": ""})
    '0.weight'
    >>> home_of("optim.fc.bias.step", {"optim": "model"})
    'model.fc.bias'
    """
    for prefix, model in where.items():
        if name.startswith(prefix + "."):
            param = name[len(prefix) + 1 :].rpartition(".")[0]
            if param:
                return f"{model}.{param}" if model else param
    return ""


def training_lines(facts: TrainingFacts | None) -> list[str]:
    """The training facts in words: the optimizer (and wrapper, notes) of a live model, or
    how each optimizer of a checkpoint was mapped to parameter names, or why it was not.

    >>> from tensorviz.core.facts import OptimizerMapping, TrainingFacts
    >>> training_lines(TrainingFacts(optimizers={"optim": OptimizerMapping("", "no saved param_names")}))
    ['optimizer state optim.state.<i>: not named after parameters: no saved param_names']
    """
    if facts is None:
        return []
    if facts.live:
        head = f"optimizer: {facts.optimizer or 'none'}" + (f" (in {facts.wrapper})" if facts.wrapper else "")
        return [head, *map(str, facts.notes or ())]
    out = []
    for prefix, info in (facts.optimizers or {}).items():
        if info.mapped_by:
            out.append(f"optimizer state {prefix}.<param name>.<key>: named by {info.mapped_by}")
        else:
            out.append(f"optimizer state {prefix}.state.<i>: not named after parameters: {info.why_not}")
    return out + [str(n) for n in facts.notes or ()]


_ROLES = {"gradients": "gradient", "optimizer": "optimizer state", "copies": "copy", "other": "other"}
#: The categories whose views have a training role (not parameter, buffer or tensor).
TRAINING_ROLES = frozenset(_ROLES)


def role(name: str, category: str, live: bool, buffers: set, unsaved: set) -> str:
    """What a name is in the module tree: its training role (gradient, optimizer state...), or
    for a live module's own tensors parameter, buffer or buffer (not saved); else "tensor"."""
    if category in _ROLES:
        return _ROLES[category]
    if not live:
        return "tensor"
    if name in unsaved:
        return "buffer (not saved)"
    return "buffer" if name in buffers else "parameter"


def category_bytes(
    layout: LayoutLike, own: Sequence[int], prefixes: Callable[[str], list[str]]
) -> dict[str, tuple[tuple[str, int], ...]]:
    """Per prefix of the module tree (``prefixes(name)`` lists a name's), the bytes each view
    owns (``own``: counted once, see :mod:`tensorviz.core.tree`) summed by category, in
    :data:`CATEGORIES` order; an optimizer state view also counts under its parameter's
    modules (:func:`home_of`). Empty unless the layout is training state."""
    if not is_training(layout):
        return {}
    where = homes(layout)
    cats: dict[str, dict[str, int]] = {}
    for v, nbytes in zip(layout.views, own):
        chain = prefixes(v.name)
        home = home_of(v.name, where) if v.category == "optimizer" and where else ""
        if home:
            chain = list(dict.fromkeys(chain + prefixes(home)))
        for p in chain:
            per = cats.setdefault(p, {})
            per[v.category] = per.get(v.category, 0) + nbytes
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return {p: tuple(sorted(per.items(), key=lambda kv: order.get(kv[0], len(order)))) for p, per in cats.items()}
