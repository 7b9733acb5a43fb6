"""The errors tensorviz raises. Every message names the culprit and suggests the fix."""

from __future__ import annotations

__all__ = ["TensorvizError", "FileFormatError", "UnsafeCheckpointError", "TooLargeError"]


class TensorvizError(Exception):
    """Base class of every error tensorviz raises on purpose."""


class FileFormatError(TensorvizError, ValueError):
    """A file is not a valid safetensors file, index or torch checkpoint (names file and tensor)."""


class UnsafeCheckpointError(TensorvizError):
    """A pickle checkpoint needs arbitrary code to load; tensorviz only loads with weights_only=True."""


class TooLargeError(TensorvizError, ValueError):
    """A request exceeds a documented limit (the message names the limit)."""
