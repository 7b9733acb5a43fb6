"""The explorer's load-check pane: what a loader would do with the explored model, beside the
save check (``tv.explore(model, load=source)``).

The pane (an anywidget, ``loadpane.js`` + ``loadpane.css``) offers the loaders that apply to the
source (:data:`CHOICES`: ``load_state_dict`` strict, non-strict and ``assign=True``,
``safetensors.load_model`` for a ``.safetensors`` file, ``from_pretrained`` for a model folder and
a transformers model, ``dcp.load`` for a DCP folder), and shows :func:`tensorviz.load_check`'s
report of the one picked as a typed :class:`LoadSection`: the verdict (raises or not, the
message's first line), missing, unexpected, mismatched, cast, conflicts and untouched names, and
the fixes to paste. A row that names model tensors selects them in the canvas (the explorer's one
selection, ``canvas.selected``); the canvas marks the names the load leaves untouched or casts
(:func:`mark_codes`, a glyph and a colour drawn by ``loadmarks.js``).

The explorer keeps no user data for it: the model and the source are held by weak reference (a
path or a :class:`~tensorviz.core.layout.Layout` as is), and a loader's report is computed when it
is picked. A plain ``dict`` cannot be weakly referenced: one of plain tensors is held as its
layout (metadata only: names in its order, shapes, strides, dtypes, shared storages), which is
all ``tv.load_check`` reads of it, so every report is the dict's own; any other such source has
every applicable report computed up front.

>>> import torch, tensorviz as tv                                      # doctest: +SKIP
>>> m = torch.nn.Linear(2, 2)                                          # doctest: +SKIP
>>> ex = tv.explore(m, load={"module.weight": torch.zeros(2, 2)})      # doctest: +SKIP
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets

from tensorviz.core.errors import OptionError
from tensorviz.core.keywords import did_you_mean
from tensorviz.core.layout import Layout
from tensorviz.core.names import elide, terminal
from tensorviz.core.units import format_bytes
from tensorviz.explorer.modules import HERE, linked
from tensorviz.loadcheck.report import NARROWING, LoadReport

__all__ = [
    "CHOICES",
    "MARK_KINDS",
    "LoaderChoice",
    "LoadRow",
    "LoadList",
    "LoadSection",
    "LoadSubject",
    "LoadPane",
    "applicable",
    "attach",
    "load_section",
    "mark_codes",
]

#: Rows a list sends at most (the rest counted: "… N more"); the text outputs show all.
ROW_CAP = 500
#: Characters of a row's text shown (start … end).
TEXT_SHOWN = 240
#: The canvas's load marks, in code order (code 0: no mark): see ``loadmarks.js``.
MARK_KINDS = ("untouched", "cast")


@dataclass(frozen=True)
class LoaderChoice:
    """One entry of the pane's loader picker: ``tv.load_check(..., loader=, strict=, assign=)``."""

    key: str
    loader: str
    strict: bool
    assign: bool
    call: str  # the call as the user writes it


#: Every loader the pane offers, in the picker's order (:func:`applicable` keeps those that apply).
CHOICES = (
    LoaderChoice("dcp.load", "dcp.load", True, False, "dcp.load(model.state_dict(), checkpoint_id=folder)"),
    LoaderChoice(
        "dcp.load(allow_partial_load)",
        "dcp.load",
        False,
        False,
        "dcp.load(sd, checkpoint_id=folder, planner=DefaultLoadPlanner(allow_partial_load=True))",
    ),
    LoaderChoice("from_pretrained", "from_pretrained", True, False, "Model.from_pretrained(folder)"),
    LoaderChoice("load_state_dict", "load_state_dict", True, False, "model.load_state_dict(sd)"),
    LoaderChoice(
        "load_state_dict(strict=False)", "load_state_dict", False, False, "model.load_state_dict(sd, strict=False)"
    ),
    LoaderChoice(
        "load_state_dict(assign=True)", "load_state_dict", True, True, "model.load_state_dict(sd, assign=True)"
    ),
    LoaderChoice(
        "safetensors.load_model", "safetensors.load_model", True, False, "safetensors.torch.load_model(model, file)"
    ),
)
_BY_KEY = {c.key: c for c in CHOICES}
_STATE_DICT = ("load_state_dict", "load_state_dict(strict=False)", "load_state_dict(assign=True)")


def applicable(model: Any, source: Any) -> tuple[str, ...]:
    """The keys of :data:`CHOICES` that apply to loading ``source`` into ``model``, the most
    specific first: a DCP folder's ``dcp.load``; a model folder's ``from_pretrained`` (for a
    transformers model) and the ``load_state_dict`` variants; a ``.safetensors`` file's
    ``load_state_dict`` variants and ``safetensors.load_model``; anything else's
    ``load_state_dict`` variants.

    >>> applicable(None, {"w": None})
    ('load_state_dict', 'load_state_dict(strict=False)', 'load_state_dict(assign=True)')
    """
    if not isinstance(source, (str, os.PathLike)):
        return _STATE_DICT
    path = os.fspath(source)
    if os.path.isfile(os.path.join(path, ".metadata")):
        return ("dcp.load", "dcp.load(allow_partial_load)")
    if path.endswith(".safetensors") and os.path.isfile(path):
        return (*_STATE_DICT, "safetensors.load_model")
    if os.path.isfile(os.path.join(path, "config.json")) and _is_pretrained(model):
        return ("from_pretrained", *_STATE_DICT)
    return _STATE_DICT


def _is_pretrained(model: Any) -> bool:
    return any(c.__name__ == "PreTrainedModel" for c in type(model).__mro__)


class LoadSubject:
    """What the pane checks: the model and the source (weak references; a path or a Layout as
    is; a plain ``dict`` of plain tensors as its layout, :func:`_as_layout`), and each loader's
    report once computed, when asked for. A model or source that none of these can hold has every
    applicable report computed here, up front.

    Raises:
        OptionError: ``choice`` is not one of the loaders that apply (naming them).
    """

    def __init__(self, model: Any, source: Any, choice: str | None = None):
        self.choices = applicable(model, source)
        self.choice = self._checked(choice or self.choices[0])
        self.source_text = _source_text(source)
        self._reports: dict[str, LoadReport | Exception] = {}
        self._model, self._source = _held(model), _held(source)
        if self._source is None and self._model is not None:
            self._source = _as_layout(source)
        if self._model is None or self._source is None:
            for key in self.choices:
                self._reports[key] = _run(model, source, key)

    @property
    def computed(self) -> tuple[str, ...]:
        """The loaders whose report has been computed so far, in the order they were."""
        return tuple(self._reports)

    def _checked(self, choice: str) -> str:
        if choice not in self.choices:
            raise OptionError(
                f"loader={choice!r} does not apply to this source; these do: {', '.join(self.choices)}"
                f"{did_you_mean(choice, self.choices)}"
            )
        return choice

    def report(self, choice: str) -> LoadReport | Exception:
        """``choice``'s report (computed once), or what the check raised; a model or source that
        is gone is a :class:`ReferenceError`."""
        choice = self._checked(choice)
        if choice not in self._reports:
            model = self._model() if self._model is not None else None
            source = self._source() if self._source is not None else None
            if model is None or source is None:
                return ReferenceError("the model or the source was deleted: run tv.load_check(model, source) again")
            self._reports[choice] = _run(model, source, choice)
        return self._reports[choice]


def _held(obj: Any) -> Callable[[], Any] | None:
    """A way back to ``obj`` that does not keep it alive (None: it cannot be weakly referenced)."""
    if isinstance(obj, (str, os.PathLike, Layout)):
        return lambda: obj
    try:
        return weakref.ref(obj)
    except TypeError:
        return None


def _as_layout(source: Any) -> Callable[[], Any] | None:
    """A plain ``dict`` of plain tensors as ``tv.load_check`` sees it: the layout of its tensors
    (``loadcheck.check._source_layout``), whose views are its keys in its order, each with its
    tensor's shape, stride and dtype, from which the check makes the same meta twin. None for
    anything else (a non-tensor value or a tensor subclass: the check reads those from the dict)."""
    import torch

    from tensorviz.sources import analyze

    plain = (torch.Tensor, torch.nn.Parameter)
    if not isinstance(source, dict) or not all(type(v) in plain and v.layout is torch.strided for v in source.values()):
        return None
    layout = analyze(source)
    if [v.name for v in layout.views] != list(source):
        return None
    return lambda: layout


def _run(model: Any, source: Any, key: str) -> LoadReport | Exception:
    from tensorviz.loadcheck.check import load_check

    c = _BY_KEY[key]
    try:
        return load_check(model, source, loader=c.loader, strict=c.strict, assign=c.assign)
    except Exception as err:  # noqa: BLE001 - shown in the pane, the explorer keeps working
        return err


def _source_text(source: Any) -> str:
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    if isinstance(source, Layout):
        return source.source or "a layout"
    return (
        f"{type(source).__name__} of {len(source):,} entries" if isinstance(source, Mapping) else type(source).__name__
    )


@dataclass(frozen=True)
class LoadRow:
    """One line of a list: its text and the model tensors it selects (none: not in the model)."""

    text: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class LoadList:
    """One list of the report (``kind``: missing, unexpected, mismatched, cast, conflicts,
    untouched, ties broken, uncovered, files) under its title."""

    kind: str
    title: str
    rows: tuple[LoadRow, ...]


@dataclass(frozen=True)
class LoadSection:
    """What the pane shows for one loader: the picker (``choices``: key and call), the verdict,
    the lists, the fixes (title, code) and the canvas marks ``(name, kind)``."""

    choice: str
    choices: tuple[tuple[str, str], ...]
    source: str
    raises: bool
    verdict: str
    clean: bool
    narrowing: int
    lists: tuple[LoadList, ...]
    fixes: tuple[tuple[str, str], ...]
    marks: tuple[tuple[str, str], ...]

    def row(self, kind: str, index: int) -> LoadRow:
        """The ``index``-th row of the list ``kind`` (what a click in the pane names).

        Raises:
            KeyError: no such list or row.
        """
        for lst in self.lists:
            if lst.kind == kind and 0 <= index < len(lst.rows):
                return lst.rows[index]
        raise KeyError(f"no row {index} in the list {kind!r}")

    def to_json(self) -> dict[str, Any]:
        """The pane's ``section`` trait: every text elided and made safe to show (escaped control
        characters); rows capped at :data:`ROW_CAP`, each with whether a click selects it."""
        return {
            "choice": self.choice,
            "choices": [[k, _shown(call)] for k, call in self.choices],
            "source": _shown(self.source),
            "raises": self.raises,
            "verdict": _shown(self.verdict),
            "clean": self.clean,
            "narrowing": self.narrowing,
            "lists": [
                {
                    "kind": lst.kind,
                    "title": lst.title,
                    "count": len(lst.rows),
                    "rows": [[_shown(r.text), bool(r.names)] for r in lst.rows[:ROW_CAP]],
                }
                for lst in self.lists
            ],
            "fixes": [[_shown(t), "\n".join(terminal(line) for line in code.splitlines())] for t, code in self.fixes],
            "marks": {k: sum(1 for _, m in self.marks if m == k) for k in MARK_KINDS},
        }


def _shown(text: str) -> str:
    return elide(terminal(text), TEXT_SHOWN)


def load_section(
    report: LoadReport | Exception,
    choice: str,
    choices: tuple[str, ...],
    names: frozenset[str] | set[str],
    source: str = "",
) -> LoadSection:
    """The pane's section of ``report`` (the report of ``choice``, or what the check raised):
    rows select the model tensors of ``names`` they name (the explored layout's names).

    >>> import torch, tensorviz as tv
    >>> m = torch.nn.Linear(2, 2)
    >>> r = tv.load_check(m, {"module.weight": torch.zeros(2, 2), "bias": torch.zeros(2)})
    >>> s = load_section(r, "load_state_dict", ("load_state_dict",), {"weight", "bias"})
    >>> s.verdict, [(x.kind, x.rows[0]) for x in s.lists]
    ('raises RuntimeError: Error(s) in loading state_dict for Linear:', [('missing', LoadRow(text='weight', names=('weight',))), ('unexpected', LoadRow(text='module.weight', names=())), ('untouched', LoadRow(text='weight', names=('weight',)))])
    """
    calls = tuple((k, _BY_KEY[k].call) for k in choices)
    if isinstance(report, Exception):
        verdict = f"the check failed: {type(report).__name__}: {report}".splitlines()[0]
        return LoadSection(choice, calls, source, False, verdict, False, 0, (), (), ())
    verdict = f"raises {report.error_line}" if report.raises else "does not raise"
    if not report.raises:
        verdict += ": clean" if report.clean else ": not clean (see the lists)"
    if report.cast:
        verdict += f"; casts {len(report.cast):,} tensors ({len(report.narrowing):,} narrowing)"
    fixes = tuple((f.title, f.code) for f in report.fixes)
    lists, marks = _lists(report, names), _marks(report, names)
    return LoadSection(
        choice, calls, source, report.raises, verdict, report.clean, len(report.narrowing), lists, fixes, marks
    )


def _lists(r: LoadReport, names: frozenset[str] | set[str]) -> tuple[LoadList, ...]:
    def row(text: str, *named: str) -> LoadRow:
        return LoadRow(text, tuple(n for n in named if n in names))

    untouched = (
        "newly initialized (random)" if r.loader == "from_pretrained" else "untouched (keep their initial values)"
    )
    out = [
        LoadList("missing", "missing", tuple(row(n, n) for n in r.missing)),
        LoadList("unexpected", "unexpected", tuple(row(n, n) for n in r.unexpected)),
        LoadList(
            "mismatched",
            "shape mismatch (model ← source)",
            tuple(row(f"{n}  {list(m)} ← {list(s)}", n) for n, m, s in r.mismatched),
        ),
        LoadList(
            "cast",
            "cast (source → model)",
            tuple(row(f"{n}  {s} → {m}{'  (narrowing)' if NARROWING(s, m) else ''}", n) for n, s, m in r.cast),
        ),
        LoadList(
            "conflicts",
            "conflicts: shared bytes fed twice",
            tuple(row(f"{' = '.join(c.names)}  winner: {c.winner}", *c.names) for c in r.conflicts),
        ),
        LoadList("untouched", untouched, tuple(row(n, n) for n in r.untouched)),
        LoadList(
            "ties_broken",
            "ties broken by assign=True",
            tuple(row(" = ".join(sorted(g)), *sorted(g)) for g in r.ties_broken),
        ),
        LoadList(
            "uncovered",
            "regions no saved chunk covers (elements)",
            tuple(row(f"{n}  {k:,}", n) for n, k in r.uncovered),
        ),
        LoadList(
            "retied", "tied after the load (target = source)", tuple(row(f"{t} = {s}", t, s) for t, s in r.retied)
        ),
        LoadList(
            "not_tied",
            "not tied: both in the files, different values",
            tuple(row(f"{t} ≠ {s}", t, s) for t, s in r.not_tied),
        ),
        LoadList(
            "files",
            "dcp.load: bytes this process reads per file",
            tuple(row(f"{f}  {format_bytes(n)} ({n:,} B)") for f, n in r.files_read.items()),
        ),
    ]
    return tuple(lst for lst in out if lst.rows)


def _marks(r: LoadReport, names: frozenset[str] | set[str]) -> tuple[tuple[str, str], ...]:
    marks = {n: "untouched" for n in r.untouched if n in names}
    marks.update({c[0]: "cast" for c in r.cast if c[0] in names and c[0] not in marks})
    return tuple(marks.items())


def mark_codes(drawn: list[str], marks: Mapping[str, str]) -> bytes:
    """One byte per drawn view (the canvas's view order): 0, or 1 + its index in :data:`MARK_KINDS`.

    >>> list(mark_codes(["a", "b", "c"], {"b": "untouched", "c": "cast"}))
    [0, 1, 2]
    """
    code = {k: i + 1 for i, k in enumerate(MARK_KINDS)}
    return bytes(code.get(marks.get(n, ""), 0) for n in drawn)


class LoadPane(anywidget.AnyWidget):
    """The pane: ``section`` (:meth:`LoadSection.to_json`) drawn by ``loadpane.js``; ``choice``
    (the loader picked, synced both ways); ``highlight`` (``[list kind, row]`` pairs of the rows
    whose names are selected now). A click on a row sends ``{"pick": [kind, row]}``."""

    _esm = linked("loadpane.js")
    _css = HERE / "loadpane.css"
    section = traitlets.Dict().tag(sync=True)
    choice = traitlets.Unicode("").tag(sync=True)
    highlight: traitlets.List = traitlets.List().tag(sync=True)


def attach(ex: Any, subject: LoadSubject) -> None:
    """Add the load pane to explorer ``ex`` right after its save check (open), and wire it: a
    loader picked shows its report and marks the canvas; a row clicked selects its names (the
    canvas's selection, drawing their storage first when they are not drawn now); the rows of
    the selected names are highlighted."""
    import ipywidgets as W

    ex.load_subject, ex.load_pane = subject, LoadPane()
    ex.load_box = W.Accordion(children=[ex.load_pane], selected_index=0)
    ex.load_box.set_title(0, f"what the load would do: {elide(terminal(subject.source_text), 120)}")
    ex.load_box.add_class("tvz-load")
    kids = list(ex.children)
    after = ex.save_pane if ex.save_pane in kids else ex.explain_pane
    kids.insert(kids.index(after) + 1, ex.load_box)
    ex.children = tuple(kids)
    ex.load_pane.observe(lambda change: _guard(ex, "load check", _show_choice, ex, change["new"]), names="choice")
    ex.load_pane.on_msg(lambda _w, content, _b: _guard(ex, "selecting from the load check", _pick, ex, content))
    ex.canvas.observe(lambda _change: _guard(ex, "load check", _highlight, ex), names="selected")
    ex.load_pane.choice = subject.choice


def _guard(ex: Any, what: str, f: Callable, *args: Any) -> None:
    """Run a pane callback; a failure goes to the explorer's status line and ``last_error``."""
    import traceback

    try:
        f(*args)
    except Exception as err:  # noqa: BLE001 - shown to the user, kept on the explorer
        ex.last_error, ex.last_traceback = err, traceback.format_exc()
        ex._say(
            f"{what} failed: {type(err).__name__}: {err} (the full traceback is in explorer.last_traceback)", error=True
        )


def _show_choice(ex: Any, choice: str) -> None:
    subject: LoadSubject = ex.load_subject
    subject.choice = subject._checked(choice)
    names = frozenset(ex.tensor_layout.names)
    ex.load_section = load_section(subject.report(choice), choice, subject.choices, names, subject.source_text)
    ex.load_pane.section = ex.load_section.to_json()
    ex.canvas.mark_views(dict(ex.load_section.marks), MARK_KINDS)
    drawn = set(ex.canvas.drawn_names)
    if any(n not in drawn for n, _ in ex.load_section.marks) and not ex.expand_box.value:
        ex.expand_box.disabled = False
        ex.expand_box.value = True  # marked names folded into the summary row: draw them one by one
    _highlight(ex)


def _pick(ex: Any, content: Any) -> None:
    """A click on a row: select its names, first drawing their storage (without a name filter
    that hides them) when they are not drawn."""
    kind, index = content["pick"]
    names = list(ex.load_section.row(str(kind), int(index)).names)
    if not names:
        return
    if any(n not in set(ex.canvas.drawn_names) for n in names):
        ex.storage_picker.value = ex.tensor_layout.storage(names[0]).index
    if any(n not in set(ex.canvas.drawn_names) for n in names):
        ex.name_filter.value = ""
    ex.canvas.selected = [n for n in names if n in set(ex.canvas.drawn_names)]


def _highlight(ex: Any) -> None:
    section: LoadSection | None = getattr(ex, "load_section", None)
    if section is None:
        return
    chosen = set(ex.canvas.selected)
    ex.load_pane.highlight = [
        [lst.kind, i] for lst in section.lists for i, r in enumerate(lst.rows) if chosen.intersection(r.names)
    ]
