"""The errors tensorviz raises. Every message names the culprit and suggests the fix."""

from __future__ import annotations

__all__ = ["TensorvizError", "FileFormatError", "UnsafeCheckpointError", "TooLargeError", "RemoteError"]


class TensorvizError(Exception):
    """Base class of every error tensorviz raises on purpose."""


class FileFormatError(TensorvizError, ValueError):
    """A file is not a valid safetensors file, index or torch checkpoint (names file and tensor)."""


class UnsafeCheckpointError(TensorvizError):
    """A pickle checkpoint needs arbitrary code to load; tensorviz only loads with weights_only=True."""


class TooLargeError(TensorvizError, ValueError):
    """A request exceeds a documented limit (the message names the limit)."""


class RemoteError(TensorvizError, OSError):
    """A remote source (an http(s), hf:// or fsspec URL) could not be read as asked: the server
    answered an error, lied about what it sent, was too slow, or redirected where tensorviz does
    not follow (the message names the URL, what happened and the fix). ``status`` is the HTTP
    status the server answered, where it answered one."""

    status: int | None = None
