"""tensorviz: see where your PyTorch tensors really live.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> tv.analyze({"w": w, "wt": w.t()}).relation("w", "wt")
'same-bytes'
"""

from __future__ import annotations

import os
from typing import Any

from .errors import FileFormatError, TensorvizError, TooLargeError, UnsafeCheckpointError
from .layout import Group, Layout, Skipped, Storage, TensorView

# ``diagram``, ``show`` and ``explain`` name both a submodule and its function. Importing a
# submodule rebinds the package attribute to the module, so bind the functions eagerly here
# (these modules are light: matplotlib is imported inside their functions).
from .diagram import diagram  # noqa: E402
from .show import show  # noqa: E402
from .explain import explain  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "analyze", "diagram", "show", "explain", "explore", "save_check",
    "Layout", "TensorView", "Storage", "Group", "Skipped",
    "TensorvizError", "FileFormatError", "UnsafeCheckpointError", "TooLargeError",
    "__version__",
]


def analyze(obj: Any) -> Layout:
    """Compute the byte layout of every named tensor in ``obj``, from metadata only.

    Args:
        obj: an ``nn.Module`` (state-dict names, tied parameters under every name, plus
            non-persistent buffers), a mapping of names to tensors (nested mappings flattened
            with "."), a tensor, a sequence of tensors, or a path (``str``/``PathLike``) to a
            ``.safetensors`` file, a ``*.safetensors.index.json``, a model folder, or a torch
            checkpoint (``.pt``/``.pth``/``.bin``).

    Returns:
        An immutable :class:`Layout`; it keeps no reference to the tensors.

    Raises:
        TypeError: ``obj`` is none of the accepted kinds (the message lists them).
        TensorvizError: a file is malformed, hostile or unsafe to load (names file and fix).

    >>> import torch, tensorviz as tv
    >>> a = torch.rand(8, 10, 50)
    >>> layout = tv.analyze({"a": a, "b": a[2:4]})
    >>> layout["b"].start, layout["b"].stop, layout.relation("a", "b")
    (4000, 8000, 'contains')
    """
    if isinstance(obj, (str, os.PathLike)):
        from .files import analyze_path

        return analyze_path(obj)
    from .collect import analyze_object

    return analyze_object(obj)


def explore(obj: Any, **options: Any):
    """Interactive ipywidgets explorer over the diagrams."""
    from .widgets import explore as _explore

    return _explore(obj, **options)


def save_check(obj: Any, **options: Any):
    """What safetensors, torch.save, transformers and accelerate would do with these tensors."""
    from .saving import save_check as _save_check

    return _save_check(obj, **options)
