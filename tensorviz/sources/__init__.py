"""The sources layer: what turns live torch objects and files into a :class:`Layout`.

``live`` reads tensors' metadata (the only module family that imports torch eagerly);
``safetensors``, ``gguf``, ``numpy_files``, ``onnx_files``, ``parts`` and ``shards`` read file
headers with the standard library alone (``formats`` picks the reader by a file's first bytes);
``checkpoint`` opens torch checkpoints with ``weights_only=True``. Imports only the core.
This module imports no torch: :func:`analyze` picks the reader by the object's kind.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from tensorviz.core.layout import Layout

__all__ = ["analyze", "is_url"]


def is_url(obj: object) -> bool:
    """Whether ``obj`` is a URL string (``scheme://…``, read by :mod:`.remote`), not a local path."""
    return isinstance(obj, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", obj) is not None


def analyze(
    obj: Any,
    *,
    group: Any = None,
    variant: str | None = None,
    optimizer: Any = None,
    grad: bool | None = None,
    remote_limits: Mapping[str, float] | None = None,
) -> Layout:
    """The layout of ``obj`` (see :func:`tensorviz.analyze`): with ``group`` a collective over
    :mod:`.distributed`; a path is read by :mod:`.files`; anything else by :mod:`.live`."""
    if (optimizer is not None or grad) and (group not in (None, False) or isinstance(obj, (str, os.PathLike))):
        raise TypeError("optimizer= and grad= read a live model's training state; not with group= or a path")
    if group is not None and group is not False:
        from tensorviz.sources.distributed.collective import analyze_group

        return analyze_group(obj, None if group is True else group)
    if remote_limits is not None and not is_url(obj):
        raise TypeError("remote_limits= bounds reading a URL (hf://, https://, s3://…); this source is not one")
    if is_url(obj):
        from tensorviz.sources.remote import analyze_url

        return analyze_url(obj, variant=variant, remote_limits=remote_limits)
    if isinstance(obj, (str, os.PathLike)):
        from tensorviz.sources.files import analyze_path

        return analyze_path(obj, variant=variant)
    if variant is not None:
        raise TypeError(f"variant= picks weights in a model folder; got a {type(obj).__qualname__}, not a path")
    from tensorviz.sources.live import analyze_object

    return analyze_object(obj, optimizer=optimizer, grad=grad)
