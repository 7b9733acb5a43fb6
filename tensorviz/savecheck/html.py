"""Script-free HTML for a :class:`~tensorviz.savecheck.report.SaveReport`, styled inline.

Every element carries its own ``style=`` attribute and there is no ``<style>`` block, because
JupyterLab's own rules (``td {text-align:right}``, ``table {table-layout:fixed; margin:auto}``)
beat a stylesheet's class selectors but lose to inline styles, and untrusted notebooks and
GitHub strip ``<style>`` entirely. A colour taken from a JupyterLab ``--jp-*`` variable is
written twice, its plain fallback first: JupyterLab's sanitizer (untrusted notebooks) drops a
``var()`` value it cannot parse and keeps the plain one; everywhere else the later ``var()``
wins. Neutral greys are translucent (``rgba(128,128,128,…)``) so they suit light and dark
themes alike. Colour never carries meaning alone: each outcome has a symbol and a word.

Layout: one compact row per saver (outcome, names kept / dropped / copied, bytes), then one
collapsed ``<details>`` per saver holding the exact message, the library's own grouping,
misfires, notes and the fixes (each collapsed again, with a one-line title). Every string from
the user (names, messages, code) goes through :func:`html.escape`.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(2, 3)
>>> page = tv.save_check({"<b>w</b>": w, "wt": w.t()}).to_html()
>>> "&lt;b&gt;w&lt;/b&gt;" in page and "<b>w</b>" not in page and "<style" not in page
True
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tensorviz.core.names import shown, shown_lines
from tensorviz.core.units import format_bytes
from tensorviz.savecheck.outcomes import renames
from tensorviz.savecheck.verdicts import not_run_by_reason

if TYPE_CHECKING:
    from tensorviz.savecheck.verdicts import Fix, ReportFacts, Verdict

__all__ = ["report_html", "STYLES"]

from tensorviz.savecheck.styles import _BADGE, _ERR, _LINE, _LOOK, _MONO, _OK, _WARN, STYLES, _css  # noqa: F401


def _e(x: object) -> str:
    """``x`` escaped for HTML and shown as data: no control or bidi character acts, and every
    line is elided to a bounded length (a 50 MB name must not become 50 MB of HTML)."""
    return html.escape(shown_lines(str(x)))


def _en(names: Iterable[str], sep: str = ", ") -> str:
    """Names joined, each escaped and elided on its own (the joined line is not cut)."""
    return html.escape(sep.join(shown(n) for n in names))


def _tag(name: str, role: str, inner: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{_e(v)}"' for k, v in attrs.items())
    return f'<{name} style="{STYLES[role]}"{extra}>{inner}</{name}>'


def _badge(outcome: str) -> str:
    symbol, colour = _LOOK.get(outcome, ("?", _WARN))
    return f'<span style="{_BADGE};{_css("color:" + colour)}">{symbol} {_e(outcome)}</span>'


def _code(text: str) -> str:
    return _tag("code", "code", _e(text))


def _bytes(n: int | None) -> str:
    return "—" if n is None else format_bytes(n)


def _exact(n: int | None) -> str:
    return "—" if n is None else f"{format_bytes(n)} ({n:,} B)" if n >= 1024 else f"{n} B"


def _few(names: Iterable[str], limit: int = 3) -> str:
    names = list(names)
    if not names:
        return "—"
    more = f" +{len(names) - limit} more" if len(names) > limit else ""
    return _en(names[:limit]) + (_tag("span", "small", _e(more)) if more else "")


# -- the table: one row per saver ---------------------------------------------------------------------
_COLUMNS = ("saver", "outcome", "names", "bytes")


def _row(v: Verdict) -> str:
    # <wbr> after the dot: in a narrow output "safetensors.save_model" breaks there, not the table
    saver = f"<b>{_e(v.saver).replace('.', '.<wbr>')}</b><br>" + _tag("span", "small", _e(v.library))
    outcome = _badge(v.outcome) + "".join("<br>" + _tag("span", "small", "+ " + _e(p)) for p in v.problems[1:])
    if v.error_type:
        outcome += "<br>" + _tag("span", "small", _e(v.error_type))
    if v.outcome in ("raises", "could not evaluate"):
        names = _tag("span", "muted", "nothing is written" if v.outcome == "raises" else "—")
        nbytes = "—"
    else:
        names, nbytes = _names(v), _nbytes(v)
    return (
        "<tr>"
        + _tag("td", "td", saver)
        + _tag("td", "td", outcome)
        + _tag("td", "names", names)
        + _tag("td", "bytes", nbytes)
        + "</tr>"
    )


def _label(word: str) -> str:
    return _tag("span", "muted", _e(word))


def _names(v: Verdict) -> str:
    lines = [_tag("span", "value", f"{_label('kept')} {len(v.kept)} of {len(v.kept) + len(v.dropped)}")]
    if v.dropped:
        lines.append(f"{_label('dropped')}&nbsp;{_few(v.dropped)}{_why_dropped(v)}")
    if v.cloned:
        lines.append(f"{_label('copied')}&nbsp;{_few(v.cloned)}")
    return "<br>".join(lines)


def _why_dropped(v: Verdict) -> str:
    """Why leaving names out is harmless (their bytes are written under a kept name), so an
    "ok" never sits beside a dropped name without the reason; nothing when bytes are lost (the
    bytes column says so in red)."""
    if v.lost_nbytes:
        return ""
    kept = set(v.kept)
    owners = [n for g in v.anchor or () if set(g) & set(v.dropped) for n in g if n in kept]
    where = f"under {_few(tuple(dict.fromkeys(owners)))}" if owners else "under the names kept"
    return "<br>" + _tag("span", "muted", f"harmless: the same bytes are written {where}")


def _value(n: int | None) -> str:
    """A byte count in binary units; the exact count shows on hover."""
    return _tag("span", "value", _e(_bytes(n)), title=_exact(n))


def _nbytes(v: Verdict) -> str:
    lines = [f"{_label('writes')} {_value(v.written_nbytes)}"]
    if v.file_nbytes is not None:
        lines.append(f"{_label('file')} {_value(v.file_nbytes)}")
    for label, n, colour in (
        ("lost", v.lost_nbytes, _ERR),
        ("written twice", v.duplicated_nbytes, _WARN),
        ("unreferenced", v.unreferenced_nbytes, _WARN),
    ):
        if n:
            style = _css("color:" + colour, "font-weight:bold")
            lines.append(f'<span style="{style}">{_e(label)} {_e(_bytes(n))}</span>')
    return "<br>".join(lines)


def _table(verdicts) -> str:
    head = "".join(_tag("th", "th", _e(c)) for c in _COLUMNS)
    rows = "".join(_row(v) for v in verdicts)
    return _tag("table", "table", f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody>")


# -- details: one collapsed block per saver -------------------------------------------------------------
def _short(text: str, limit: int = 64) -> str:
    """The first clause of ``text`` (up to a ``.,;:!?`` and a space), at most ``limit`` characters."""
    text = " ".join(text.split())
    first = re.split(r"(?<=[.,:;!?])\s", text, maxsplit=1)[0].rstrip(".,:;")
    if len(first) <= limit:
        return first + ("…" if len(first) < len(text.rstrip(".")) else "")
    return first[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _gist(v: Verdict) -> str:
    """A few words after the badge in a verdict's summary line."""
    if v.message:
        return (f"{v.error_type}: " if v.error_type else "") + _short(v.message.removeprefix("could not evaluate: "))
    if v.lost_nbytes:
        return f"loses {format_bytes(v.lost_nbytes)}: drops {', '.join(v.dropped[:3])}"
    if v.duplicated_nbytes:
        return f"writes {format_bytes(v.duplicated_nbytes)} twice"
    if v.unreferenced_nbytes:
        return f"writes {format_bytes(v.unreferenced_nbytes)} no tensor reads"
    if v.dropped:
        return f"writes every byte once, leaving out {len(v.dropped)} alias{'es' * (len(v.dropped) != 1)}"
    return "writes every byte once"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}" if n else ""


def _summary(v: Verdict) -> str:
    counts = [
        c
        for c in (
            _count(len(v.misfires), "misfire"),
            _count(len(v.fixes), "fix"),
            _count(len(v.notes) + len(v.logs), "note"),
        )
        if c
    ]
    counts = [c.replace("fixs", "fixes") for c in counts]
    tail = _tag("span", "small", _e(" · " + ", ".join(counts))) if counts else ""
    return _tag("summary", "summary", f"<b>{_e(v.saver)}</b> {_badge(v.outcome)} {_e(_gist(v))}{tail}")


def _line(label: str, inner: str, role: str = "line") -> str:
    return _tag("div", role, (f"<b>{_e(label)}</b> " if label else "") + inner)


def _verdict_body(v: Verdict) -> str:
    parts = [_line("call:", _code(v.call) + " " + _tag("span", "small", _e(v.library)))]
    if v.message:
        parts.append(_tag("pre", "pre", _e((f"{v.error_type}: " if v.error_type else "") + v.message.strip())))
    if v.outcome not in ("raises", "could not evaluate"):
        parts.append(_line("bytes:", _e(" · ".join(_bytes_facts(v)))))
    if v.dropped:
        parts.append(_line("dropped:", _en(v.dropped)))
    if v.renamed:
        parts.append(_line("renamed to:", _e(renames(v.renamed, limit=50))))
    if v.ignored:
        parts.append(_line("ignored on save by the model's own rule:", _en(v.ignored)))
    if v.cloned:
        parts.append(_line("written as copies:", _en(v.cloned)))
    if v.anchor:
        groups = "; ".join("{" + _en(g) + "}" for g in v.anchor)
        parts.append(_line("the library groups:", groups + " " + _tag("span", "small", "by " + _e(v.anchor_name))))
    for m in v.misfires:
        parts.append(_line("", f"⚠ <b>the library</b>: {_e(m.library)}", "warn") + _line("in fact:", _e(m.tensorviz)))
    for log in v.logs:
        parts.append(_line("it logs:", _e(log)))
    for note in v.notes:
        parts.append(_line("note:", _e(note)))
    parts += [_fix(i, f) for i, f in enumerate(v.fixes, 1)]
    return _tag("div", "body", "".join(parts))


def _bytes_facts(v: Verdict) -> list[str]:
    facts = [f"writes {_exact(v.written_nbytes)}", f"unique {_exact(v.unique_nbytes)}"]
    if v.file_nbytes is not None:
        facts.append(f"file {_exact(v.file_nbytes)}" + (" for archive.pt" if v.saver == "torch.save" else ""))
    for label, n in (
        ("lost", v.lost_nbytes),
        ("written twice", v.duplicated_nbytes),
        ("unreferenced", v.unreferenced_nbytes),
    ):
        if n:
            facts.append(f"{label} {_exact(n)}")
    return facts


def _fix(i: int, f: Fix) -> str:
    title = f.title or f.problem
    body = (_tag("div", "muted", _e(f.note)) if f.note else "") + _tag("pre", "pre", _e(f.code()))
    body += _line("load it back:", "") + _tag("pre", "pre", _e(f.load_code))
    return _tag(
        "details", "details", _tag("summary", "summary", f"<b>fix {i}</b>: {_e(title)}") + _tag("div", "body", body)
    )


def _details(verdicts) -> str:
    return "".join(_tag("details", "details", _summary(v) + _verdict_body(v)) for v in verdicts)


# -- ties, versions, the whole report --------------------------------------------------------------------
def _yes(flag: bool) -> str:
    return "<b>yes</b>" if flag else "no"


def _ties(ties) -> str:
    head = "".join(_tag("th", "th", c) for c in ("names", "storage", "Python object", "declared", "how"))
    rows = "".join(
        "<tr>"
        + _tag("td", "names", _en(g.names))
        + _tag("td", "bytes", _yes(g.storage))
        + _tag("td", "bytes", _yes(g.object))
        + _tag("td", "bytes", _yes(g.declared))
        + _tag("td", "td", _en((f"{n} {r} {g.names[0]}" for n, r in zip(g.names[1:], g.relations[1:]) if r), "; "))
        + "</tr>"
        for g in ties.groups
    )
    table = (
        _tag("table", "table", f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody>")
        if rows
        else _line("", "none", "muted")
    )
    facts = [
        _line(
            "",
            f"Python-object ties from {_e(ties.object_source)}; declared ties from {_e(ties.declared_source)}",
            "muted",
        )
    ]
    facts += [_line("", f"{_e(k)} = {_e(val)}", "muted") for k, val in ties.config]
    facts += [_line("", f"⚠ <b>mismatch</b>: {_e(m)}", "warn") for m in ties.mismatches]
    return _tag("div", "section", "Ties: storage, Python object, declared") + table + "".join(facts)


def _header(report: ReportFacts) -> str:
    from tensorviz.savecheck.outcomes import OUTCOMES

    outcomes = [v.outcome for v in report.verdicts]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in OUTCOMES if o in outcomes)
    return _tag(
        "div",
        "head",
        f"<b>Save check of {_e(report.source)}</b>: {len(report.verdicts)} savers "
        f"({_e(counts)}) · unique tensor bytes {_e(_exact(report.unique_nbytes))}",
    )


def report_html(report: ReportFacts) -> str:
    """The report as one HTML fragment: header, table, per-saver details, ties, versions."""
    parts = [_header(report)]
    parts += [_line("note:", _e(n), "muted") for n in report.notes]
    parts += [_line("not run:", _e(f"{', '.join(s)} ({why})"), "muted") for why, s in not_run_by_reason(report.not_run)]
    parts.append(_table(report.verdicts))
    parts.append(
        _tag(
            "div",
            "muted",
            "Details per saver (click to open): the exact message, "
            "what the library's own check concluded, and code that fixes each problem",
        )
    )
    parts.append(_details(report.verdicts))
    if report.ties is not None:
        parts.append(_ties(report.ties))
    versions = ", ".join(f"{k} {v}" for k, v in report.versions)
    parts.append(_tag("div", "versions", "versions: " + _e(versions)))
    return _tag("div", "root", "".join(parts), **{"class": "tensorviz-save-check"})
