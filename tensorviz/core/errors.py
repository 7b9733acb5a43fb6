"""The errors tensorviz raises. Every message names the culprit and suggests the fix."""

from __future__ import annotations

__all__ = [
    "TensorvizError",
    "FileFormatError",
    "UnsafeCheckpointError",
    "TooLargeError",
    "RemoteError",
    "OptionError",
    "UnknownOptionError",
    "MissingExtraError",
]


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


class OptionError(TensorvizError, ValueError):
    """An option of a public function has a value it cannot take, or cannot apply with the
    others given (the message shows the value and the fix; the public function the user
    called re-says it in its own name: ``tv.show(): ...``). ``function`` is that name, once set."""

    function: str | None = None


class UnknownOptionError(TensorvizError, TypeError):
    """A public function was given a keyword it does not have (the message names the closest one)."""


class MissingExtraError(TensorvizError, ImportError):
    """An optional dependency is not installed (the message names the ``pip install`` that adds
    it); ``name`` is the missing module, as on ``ImportError``."""
