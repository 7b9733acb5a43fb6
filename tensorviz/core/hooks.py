"""Upward calls from the core, wired by the package facade.

The core is the lowest layer: it may not import the renderers, the save check or the sources.
Yet a :class:`~tensorviz.core.layout.Layout` offers conveniences that live above it
(``plot()``, ``save_check()``, its rich display, ``as_layout(obj)``). Those methods call
:func:`call` with a name; ``tensorviz/__init__.py`` registers, for each name, a function of the
layer that owns it (imported lazily, when first called). So the import graph keeps pointing
down, and the convenience still works wherever ``tensorviz`` is imported -- which it always is,
since every submodule's import runs the package's ``__init__`` first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["register", "call"]

_REGISTRY: dict[str, Callable[..., Any]] = {}


def register(name: str, fn: Callable[..., Any]) -> None:
    """Make ``call(name, ...)`` run ``fn(...)`` (the facade does this once, at import)."""
    _REGISTRY[name] = fn


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the function registered under ``name``."""
    try:
        fn = _REGISTRY[name]
    except KeyError:
        raise RuntimeError(f"tensorviz hook {name!r} is not registered; import tensorviz first") from None
    return fn(*args, **kwargs)
