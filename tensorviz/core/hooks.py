"""The upward calls of the lower layers: the one list, typed, each answered by one function.

The core and the plan are the lowest layers: they may not import the sources, the renderers or
the save check. Yet a :class:`~tensorviz.core.layout.Layout`, a
:class:`~tensorviz.core.tree.ModelTree` and a :class:`~tensorviz.plan.model.Diagram` offer
conveniences that live above them (``layout.plot()``, ``layout.save_check()``, their rich
display, ``diagram.to_text()``, ``as_layout(obj)``). Each of those calls :func:`call` with one
of the names of :data:`HOOKS`; ``tensorviz/__init__.py`` registers the answering function for
every name when the package is imported -- which it always is, since every submodule's import
runs the package's ``__init__`` first. So the import graph points down, the names are checked
by the type checker (:data:`Hook`), and this table says, for each, who calls and who answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

__all__ = ["Hook", "HOOKS", "register", "call"]

Hook = Literal["analyze", "layout.mimebundle", "layout.plot", "layout.save_check", "diagram.text", "tree.html"]

#: Every upward call: its name -> (who calls it, what answers it).
HOOKS: dict[Hook, tuple[str, str]] = {
    "analyze": ("core.layout.as_layout(obj)", "tensorviz.sources.analyze"),
    "layout.mimebundle": ("Layout._repr_mimebundle_", "tensorviz.render.show (PNG + HTML) and the module tree"),
    "layout.plot": ("Layout.plot(...)", "tensorviz.render.mpl.render of tensorviz.plan.diagram.diagram"),
    "layout.save_check": ("Layout.save_check(...)", "tensorviz.savecheck.report.save_check"),
    "diagram.text": ("plan.model.Diagram.to_text(width)", "tensorviz.render.text.diagram_text"),
    "tree.html": ("core.tree.ModelTree._repr_mimebundle_", "tensorviz.render.html.tree.tree_html"),
}
assert set(HOOKS) == set(get_args(Hook))

_REGISTRY: dict[Hook, Callable[..., Any]] = {}


def register(name: Hook, fn: Callable[..., Any]) -> None:
    """Make ``call(name, ...)`` run ``fn(...)`` (the facade does this once, at import)."""
    if name not in HOOKS:
        raise ValueError(f"unknown hook {name!r}; the hooks are {list(HOOKS)}")
    _REGISTRY[name] = fn


def call(name: Hook, *args: Any, **kwargs: Any) -> Any:
    """Run the function registered under ``name``."""
    try:
        fn = _REGISTRY[name]
    except KeyError:
        raise RuntimeError(f"tensorviz hook {name!r} is not registered; import tensorviz first") from None
    return fn(*args, **kwargs)
