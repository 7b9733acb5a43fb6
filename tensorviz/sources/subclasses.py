"""Traceable tensor subclasses (``__tensor_flatten__``): the plain tensors that hold their data.

torchao's ``Int8Tensor``/``Int4Tensor``/``Float8Tensor``/``NF4Tensor``, torch's ``TwoTensor``
and a user's own ``__torch_dispatch__`` wrapper keep their values in inner tensors that
``__tensor_flatten__`` names; the wrapper's own storage is empty or a stand-in. Laid out, such a
tensor is its inner tensors, found recursively (an inner tensor may itself be traceable).
Metadata only: the hook returns attribute names, and ``getattr`` reads the tensors themselves.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

__all__ = ["flatten", "is_traceable", "MAX_DEPTH"]

#: Deepest nesting of subclasses followed (a subclass wrapping itself would never end).
MAX_DEPTH = 16


def is_traceable(t: Any) -> bool:
    """Whether ``t`` is a tensor subclass that names its inner tensors (``__tensor_flatten__``).

    DTensor and nested tensors are handled before this is asked; FakeTensor has no such hook.

    >>> import torch
    >>> from torch.testing._internal.two_tensor import TwoTensor
    >>> is_traceable(TwoTensor(torch.zeros(2), torch.ones(2))), is_traceable(torch.zeros(2))
    (True, False)
    """
    cls = type(t)
    known = _TRACEABLE.get(cls)
    if known is None:
        known = _TRACEABLE[cls] = (
            cls is not torch.Tensor and cls is not torch.nn.Parameter and hasattr(cls, "__tensor_flatten__")
        )
    return known


# By class, asked once per value on the careful path; weak, so a class made at run time can go.
_TRACEABLE: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def flatten(t: torch.Tensor) -> list[tuple[str, torch.Tensor]] | str:
    """``(inner path, plain tensor)`` for every inner tensor of a traceable subclass, depth
    first, in the order ``__tensor_flatten__`` names them (nested paths join with "."); or a
    reason a person understands when the hook fails or names something that is not a tensor.

    >>> import torch
    >>> from torch.testing._internal.two_tensor import TwoTensor
    >>> [(p, tuple(x.shape)) for p, x in flatten(TwoTensor(torch.zeros(2), torch.ones(2)))]
    [('a', (2,)), ('b', (2,))]
    """
    out: list[tuple[str, torch.Tensor]] = []
    stack: list[tuple[str, Any, int]] = [("", t, 0)]
    while stack:
        path, x, depth = stack.pop()
        if not is_traceable(x):
            out.append((path, x))
            continue
        kind = type(x).__qualname__
        if depth >= MAX_DEPTH:
            return (
                f"tensor subclass {kind} nests more than {MAX_DEPTH} traceable subclasses deep; tensorviz stops there"
            )
        try:
            inner = [(a, getattr(x, a)) for a in _inner_names(x)]
        except Exception as err:  # noqa: BLE001 - a subclass's own hook failing must not stop analysis
            first = (str(err).splitlines() or [""])[0]
            return (
                f"tensor subclass {kind}: its __tensor_flatten__ failed ({type(err).__name__}: {first}), "
                f"so its inner tensors cannot be found; its own storage is not where its data lives"
            )
        bad = [a for a, v in inner if not isinstance(v, torch.Tensor)]
        if bad:
            return (
                f"tensor subclass {kind}: __tensor_flatten__ names {', '.join(bad)}, which "
                f"{'is' if len(bad) == 1 else 'are'} not a tensor; its inner tensors cannot be laid out"
            )
        stack.extend((f"{path}.{a}" if path else a, v, depth + 1) for a, v in reversed(inner))
    return out


def _inner_names(x: Any) -> list[str]:
    """The names ``x.__tensor_flatten__()`` returns. torchao's hook (``TorchAOBaseTensor``) also
    builds a dict of every attribute (~8 us a tensor); its names are read here as it reads them,
    from the class's ``tensor_data_names`` plus the ``optional_tensor_data_names`` that are set."""
    cls = type(x)
    ao = _TORCHAO_HOOK.get(cls)
    if ao is None:
        hook = getattr(cls, "__tensor_flatten__", None)
        ao = _TORCHAO_HOOK[cls] = getattr(hook, "__qualname__", "") == "TorchAOBaseTensor.__tensor_flatten__"
    if ao and hasattr(x, "tensor_data_names") and hasattr(x, "tensor_attribute_names"):
        names = list(x.tensor_data_names)
        return names + [n for n in getattr(x, "optional_tensor_data_names", ()) if getattr(x, n) is not None]
    return list(x.__tensor_flatten__()[0])


_TORCHAO_HOOK: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
