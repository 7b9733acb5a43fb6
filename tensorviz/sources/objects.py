"""Reading a live object that may fight back, with bounded work and a named reason.

A valid Python object can still break a naive walk: a module registered as its own child (or
two modules holding each other) makes ``state_dict()`` and ``named_modules()`` recurse forever;
a module shared under two names at every level is 2**depth names; ``state_dict()`` may raise or
return a generator; ``__getattribute__`` or a key's ``__str__`` may raise. These helpers turn
each into a skip reason (or a budget's TooLargeError), never a raw exception, and catch only
the errors such code raises -- never KeyboardInterrupt, an alarm's exception or a budget.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from tensorviz.core import limits
from tensorviz.core.names import elide, terminal
from tensorviz.sources.distributed.fsdp_units import gathered_to_sharded, module_values
from tensorviz.sources.parts import short

__all__ = [
    "module_items",
    "STATE",
    "Unreadable",
    "READ_ERRORS",
    "module_problem",
    "first_line",
    "is_container",
    "CONTAINERS",
]

CONTAINERS = (Mapping, list, tuple, torch.nn.Module)


class Unreadable:
    """A value that stands for what could not be read (a module's state), with why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


STATE = "<state_dict>"  # the name part under which a module's unreadable state is skipped
#: What reading a user object's own metadata may raise (never KeyboardInterrupt, an alarm's
#: exception, or a budget's TooLargeError: those end the analysis instead of one value).
READ_ERRORS = (
    RuntimeError,
    TypeError,
    ValueError,
    AttributeError,
    NotImplementedError,
    IndexError,
    KeyError,
    AssertionError,
)


def module_problem(module: torch.nn.Module) -> str | None:
    """Why ``module``'s submodules cannot be walked (a module that is its own descendant), or
    None; iterative, counting module visits against the ``live_names`` budget (a module
    shared under two names at every level is 2**depth names to ``named_modules``)."""
    left = limits.current().live_names
    on_path = {id(module)}
    stack: list[tuple[int, str, Iterator]] = [(id(module), "", _children(module))]
    while stack:
        ident, _, children = stack[-1]
        item = next(children, None)
        if item is None:
            stack.pop()
            on_path.discard(ident)
            continue
        key, child = item
        left -= 1
        if left < 0:
            raise limits.exceeded(
                "the module's submodules", "live_names", "counted once per name they are reachable by"
            )
        if id(child) in on_path:
            full = ".".join([str(k) for _, k, _ in stack[1:]] + [str(key)])
            return (
                f"module cycle: {terminal(elide(full, 120))!r} is the module itself or one that holds it, "
                f"so state_dict() and named_modules() would recurse forever"
            )
        on_path.add(id(child))
        stack.append((id(child), key, _children(child)))
    return None


def _children(m: Any) -> Iterator[tuple[str, Any]]:
    children = getattr(m, "_modules", None)
    items = children.items() if isinstance(children, dict) else ()
    return ((k, c) for k, c in items if c is not None)


def first_line(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:  # noqa: BLE001 - an exception whose message cannot be made
        return "?"
    return terminal(elide((text.splitlines() or [""])[0], 200))


def is_container(value: Any) -> bool:
    """``isinstance(value, (Mapping, list, tuple, Module))``; False for an object whose
    ``__class__`` (or ``__getattribute__``) raises: it is then skipped as what it is."""
    try:
        return isinstance(value, CONTAINERS)
    except READ_ERRORS:
        return False


def module_items(module: torch.nn.Module, prefix: str) -> Iterator[tuple[str, Any]]:
    pre = f"{prefix}." if prefix else ""
    problem = module_problem(module)
    if problem:
        yield pre + STATE, Unreadable(problem)
        return
    swap = gathered_to_sharded(module)
    if swap:  # FSDP2 mid-step: state_dict() would reshard the model; read its attributes instead
        yield from ((pre + name, value) for name, value in module_values(module, swap))
        return
    try:
        state = module.state_dict(keep_vars=True)
        if not isinstance(state, Mapping):
            raise TypeError(f"it returned a {type(state).__name__}, not a mapping of names to tensors")
        items = iter(state.items())
    except READ_ERRORS + (RecursionError,) as err:
        yield pre + STATE, Unreadable(f"state_dict() failed ({type(err).__name__}: {first_line(err)})")
        return
    yield from ((pre + name, value) for name, value in items)
    for name, buf in module.named_buffers(remove_duplicate=False):
        if name not in state and buf is not None:
            yield pre + name, buf


def is_module(value: Any) -> bool:
    """``isinstance(value, nn.Module)``; False for an object whose ``__class__`` raises."""
    try:
        return isinstance(value, torch.nn.Module)
    except READ_ERRORS:
        return False


def key_text(key: Any) -> str:
    """A non-string key as a name part, with bounded work: a tuple key nested 10**5 deep, or
    one whose ``__str__`` raises, still names its value."""
    try:
        text = short(key, 300) if isinstance(key, tuple) else str(key)
    except (Exception, RecursionError) as err:  # noqa: BLE001 - the key's own code failed
        return f"<{type(key).__name__} key: str() raised {type(err).__name__}>"
    return text if type(text) is str and len(text) <= 300 else elide(str(text), 300)
