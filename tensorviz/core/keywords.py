"""What the public functions say about their own options: unknown keywords with a "did you
mean", option errors re-said once in the name of the function the user called, optional
dependencies that are missing named with their ``pip install 'tensorviz[…]'`` command, and the
descriptions of the options several functions share (written once, filled into each docstring).

Pure standard library: the facade (:mod:`tensorviz`) wraps each public function with
:func:`public`; the plan's option checks use :func:`did_you_mean`.
"""

from __future__ import annotations

import copy
import difflib
import functools
import inspect
import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

from tensorviz.core.errors import MissingExtraError, OptionError, UnknownOptionError

__all__ = ["did_you_mean", "public", "needs_extra", "extra_message", "fill_args", "EXTRA_OF"]

F = TypeVar("F", bound=Callable[..., Any])

#: The optional packages tensorviz uses, and the extra that installs each (``pyproject.toml``).
EXTRA_OF: dict[str, str] = {
    "matplotlib": "plot",
    "ipywidgets": "widgets",
    "anywidget": "widgets",
    "IPython": "widgets",
    "safetensors": "files",
    "tqdm": "files",
    "huggingface_hub": "remote",
    "fsspec": "remote",
    "gguf": "formats",
    "onnx": "formats",
}


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the choice closest to ``word`` (difflib), or ``""``.

    >>> did_you_mean("spam", ["storage", "span", "overlap"])
    "; did you mean 'span'?"
    >>> did_you_mean(3, ["storage"])
    ''
    """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _keyword_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(n for n, p in inspect.signature(fn).parameters.items() if p.kind in kinds)


def unknown_keyword(function: str, word: str, names: tuple[str, ...]) -> str:
    """The message for ``function(word=...)`` when ``word`` is none of ``names``.

    >>> unknown_keyword("tv.show", "by_", ("by", "names"))
    "tv.show() got an unexpected keyword argument 'by_'; did you mean 'by'? Its options: by, names"
    """
    hint = did_you_mean(word, names) or "."
    return f"{function}() got an unexpected keyword argument {word!r}{hint} Its options: {', '.join(names)}"


def public(fn: F) -> F:
    """``fn`` as the user calls it, ``tv.<name>``: an unknown keyword raises
    :class:`UnknownOptionError` naming ``tv.<name>`` and the closest keyword, and an
    :class:`OptionError` raised anywhere below is re-raised once, prefixed with ``tv.<name>():``
    (so ``tv.show(by="spam")`` does not blame the ``diagram()`` it calls). The signature and the
    docstring are ``fn``'s own (``inspect.signature`` and ``tv.<name>?`` show them).
    """
    every = _keyword_names(fn)
    accepted = frozenset(every)
    params = inspect.signature(fn).parameters.values()
    names = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY) or every
    label = f"tv.{fn.__name__}"

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        for word in kwargs:
            if word not in accepted:
                raise UnknownOptionError(unknown_keyword(label, word, names)) from None
        try:
            return fn(*args, **kwargs)
        except OptionError as err:
            if getattr(err, "function", None):
                raise  # already said by the outer public function
            raise _said_by(err, label) from None

    return call  # type: ignore[return-value]


def _said_by(err: OptionError, label: str) -> OptionError:
    new = copy.copy(err)
    new.args = (f"{label}(): {err}",) + err.args[1:]
    new.function = label
    return new


def extra_message(module: str, feature: str) -> str:
    """What to install when ``module`` is missing for ``feature``.

    >>> extra_message("matplotlib", "tv.show() draws the picture with matplotlib")
    "tv.show() draws the picture with matplotlib, which is not installed: pip install 'tensorviz[plot]'"
    """
    return f"{feature}, which is not installed: pip install 'tensorviz[{EXTRA_OF[module]}]'"


@contextmanager
def needs_extra(feature: str) -> Iterator[None]:
    """Turn a missing optional package (one of :data:`EXTRA_OF`) met inside the block into a
    :class:`MissingExtraError` saying ``feature`` needs it and the ``pip install`` that adds it;
    ``feature`` is written with ``{module}`` where the package's name goes."""
    try:
        yield
    except ModuleNotFoundError as err:
        root = (err.name or "").partition(".")[0]
        if root not in EXTRA_OF:
            raise
        raise MissingExtraError(extra_message(root, feature.format(module=root)), name=root) from err


_MARKER = re.compile(r"^(?P<indent>[ \t]*)<shared options>\n", re.MULTILINE)


def fill_args(docs: Mapping[str, str]) -> Callable[[F], F]:
    """Fill the line ``<shared options>`` of a docstring's ``Args:`` section with the entries of
    ``docs`` for the function's own parameters, in signature order: options several functions
    share are described once (e.g. :data:`tensorviz.plan.options.OPTION_DOCS`). A parameter the
    docstring describes itself (its meaning differs there) keeps its own words.
    """

    def fill(fn: F) -> F:
        doc = fn.__doc__
        if doc is None:  # python -OO: no docstrings to fill
            return fn
        match = _MARKER.search(doc)
        if match is None:
            raise ValueError(f"{fn.__qualname__}'s docstring has no '<shared options>' line")
        indent = match["indent"]
        entries = "".join(
            textwrap.fill(f"{name}: {docs[name]}", width=100, initial_indent=indent, subsequent_indent=indent + "    ")
            + "\n"
            for name in _keyword_names(fn)
            if name in docs and not re.search(rf"^\s+{name}: ", doc, re.M)  # its own words win
        )
        fn.__doc__ = doc[: match.start()] + entries + doc[match.end() :]
        return fn

    return fill
