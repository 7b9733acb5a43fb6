"""The explorer's "compare with…" control: pick a second source from the UI (issue 23 item 3).

A row under the storage controls: a text field taking a path or URL (whatever ``tv.diff`` takes
as a path: a file, a folder, an index, a DCP folder, an ``http(s)://`` or ``hf://`` source),
a dropdown of the named things ``tv.explore(obj, compare_choices={...})`` was given (when it was
given some), "compare" and "stop comparing". A source that cannot be read leaves the picture as
it was and says why in the row: the library's own message (naming the file and the fix),
escaped, never a traceback (that stays in ``explorer.last_traceback``).

The choices are analysed when the explorer is built (paths stay paths, read when picked), so the
explorer keeps metadata only, as it does for ``obj``.

>>> import torch, tensorviz as tv                                          # doctest: +SKIP
>>> ex = tv.explore(model, compare_choices={"reloaded": reloaded_sd})      # doctest: +SKIP
>>> ex.compare_path.value = "checkpoints/step-1000/model.safetensors"      # doctest: +SKIP
"""

from __future__ import annotations

import html
import os
import traceback
from collections.abc import Mapping
from typing import Any

import ipywidgets as W

from tensorviz.core.diff import LayoutDiff
from tensorviz.core.layout import as_layout
from tensorviz.core.names import elide, terminal

__all__ = ["attach", "choice_layouts"]

_NONE = ""  # the dropdown's "pick one" entry
_SOURCE_SHOWN = 160  # characters of a source named in the row's message


def choice_layouts(choices: Mapping[str, Any] | None) -> dict[str, Any]:
    """``compare_choices`` as kept: each value a Layout (analysed now), or a path kept as text
    (read when picked).

    Raises:
        TypeError: ``choices`` is not a mapping of names, or a value is nothing ``tv.analyze`` takes.
        TensorvizError: a value cannot be analysed (the message names it).
    """
    if choices is None:
        return {}
    if not isinstance(choices, Mapping) or not all(isinstance(k, str) and k for k in choices):
        raise TypeError(
            "compare_choices must map names to what to compare with, e.g. {'reloaded': sd, 'step 1000': 'ckpt/'}"
        )
    kept: dict[str, Any] = {}
    for name, value in choices.items():
        if isinstance(value, LayoutDiff):
            raise TypeError(f"compare_choices[{name!r}] is a diff: give its other side (what tv.diff compared with)")
        kept[name] = os.fspath(value) if isinstance(value, (str, os.PathLike)) else as_layout(value)
    return kept


def attach(ex: Any, choices: dict[str, Any]) -> None:
    """Add the "compare with…" row to explorer ``ex`` (before its status line) and wire it:
    Enter in the text field or "compare" compares with the path typed, a dropdown pick with
    that choice, "stop comparing" goes back to one source."""
    ex.compare_choices = choices
    ex.compare_path = W.Text(
        placeholder="path or URL: a file, folder, hf://…",
        tooltip="a file, folder, index, DCP folder or URL (http(s)://, hf://…): Enter compares",
        continuous_update=False,
        layout=W.Layout(width="260px"),
    )
    ex.compare_path.add_class("tvz-compare-path")
    ex.compare_choice = W.Dropdown(
        options=[("— a named choice —", _NONE), *((elide(terminal(n), 60), n) for n in choices)],
        value=_NONE,
        layout=W.Layout(width="auto", max_width="260px"),
    )
    ex.compare_choice.layout.display = None if choices else "none"
    auto = dict(width="auto")
    ex.compare_button = W.Button(description="compare", tooltip="compare with the path typed", layout=W.Layout(**auto))
    ex.compare_stop = W.Button(description="stop comparing", layout=W.Layout(**auto))
    ex.compare_stop.layout.display = None if ex.compare_rows is not None else "none"  # shown while comparing
    ex.compare_note = W.HTML(layout=W.Layout(display="none"))
    ex.compare_note.add_class("tvz-compare-note")
    label = W.HTML("compare with", layout=W.Layout(width="92px", margin="0 0 0 6px"))
    parts = [label, ex.compare_path, ex.compare_choice, ex.compare_button, ex.compare_stop, ex.compare_note]
    ex.compare_box = W.HBox(parts, layout=W.Layout(flex_flow="row wrap", align_items="center"))
    ex.compare_box.add_class("tvz-row")
    ex.compare_box.add_class("tvz-compare")
    kids = list(ex.children)
    kids.insert(kids.index(ex.status_line), ex.compare_box)
    ex.children = tuple(kids)
    ex.compare_path.observe(lambda change: _typed(ex, change["new"]), names="value")
    ex.compare_button.on_click(lambda _b: _typed(ex, ex.compare_path.value, again=True))
    ex.compare_choice.observe(lambda change: _picked(ex, change["new"]), names="value")
    ex.compare_stop.on_click(lambda _b: _compare(ex, None, ""))
    if ex.compare_rows is not None:
        _say(ex, f"comparing with {elide(terminal(ex.compare_rows.diff.source_b), _SOURCE_SHOWN)}", error=False)


def _typed(ex: Any, text: str, again: bool = False) -> None:
    source = text.strip()
    if not source:
        if again:
            _say(ex, "type a path or URL to compare with (a file, folder, index, DCP folder or hf://…)", error=True)
        return
    if again or source != getattr(ex, "_compared_source", None):
        _compare(ex, source, source)


def _picked(ex: Any, name: str) -> None:
    if name != _NONE:
        _compare(ex, ex.compare_choices[name], name)


def _compare(ex: Any, source: Any, label: str) -> None:
    """Compare ``ex`` with ``source`` (None: stop); a failure keeps the picture and says why."""
    shown = elide(terminal(label), _SOURCE_SHOWN)
    try:
        ex.compare_with(source)
    except Exception as err:  # noqa: BLE001 - shown to the user, kept on the explorer
        ex.last_error, ex.last_traceback = err, traceback.format_exc()
        ex._compared_source = None
        _say(ex, f"could not compare with {shown}: {_words(err)}", error=True)
        return
    ex._compared_source = source if isinstance(source, str) else None
    ex.compare_stop.layout.display = "none" if source is None else None
    if source is None:
        _say(ex, "", error=False)
        return
    _say(ex, f"comparing with {shown}", error=False)


def _words(err: BaseException) -> str:
    """The error's own message; its type too when it is not the library's own (a TensorvizError)."""
    from tensorviz.core.errors import TensorvizError

    text = str(err) or type(err).__name__
    return text if isinstance(err, (TensorvizError, FileNotFoundError)) else f"{type(err).__name__}: {text}"


def _say(ex: Any, text: str, error: bool) -> None:
    """The row's message (escaped; hidden when there is none, so the row stays one line)."""
    cls = "tvz-error" if error else "tvz-muted"
    ex.compare_note.value = (
        f'<span class="{cls}">{"⚠ " if error else ""}{html.escape(terminal(text))}</span>' if text else ""
    )
    ex.compare_note.layout.display = None if text else "none"
