"""Plain text for a :class:`~tensorviz.savecheck.report.SaveReport` (the HTML lives in :mod:`tensorviz.savecheck.html`)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tensorviz.core.names import LINE_CAP, elide, shown
from tensorviz.core.units import format_bytes
from tensorviz.savecheck.html import report_html
from tensorviz.savecheck.outcomes import renames
from tensorviz.savecheck.verdicts import not_run_by_reason

if TYPE_CHECKING:
    from tensorviz.savecheck.verdicts import ReportFacts, Verdict

__all__ = ["report_text", "report_html"]

_MARK = {
    "ok": "ok",
    "raises": "RAISES",
    "drops data": "DROPS DATA",
    "duplicates bytes": "DUPLICATES BYTES",
    "writes unreferenced bytes": "WRITES UNREFERENCED BYTES",
    "could not evaluate": "could not evaluate",
}


def _b(n: int | None) -> str:
    return "—" if n is None else f"{format_bytes(n)} ({n} B)" if n >= 1024 else f"{n} B"


def _names(names: Iterable[str], limit: int = 8, full: bool = False) -> str:
    names = list(names)
    if full:
        limit = len(names)
    more = f" … +{len(names) - limit}" if len(names) > limit else ""
    return ", ".join(shown(n, full) for n in names[:limit]) + more if names else "none"


def _bytes_line(v: Verdict) -> str:
    return " · ".join(_bytes_parts(v))


def _bytes_parts(v: Verdict) -> list[str]:
    if v.outcome == "could not evaluate":
        return []
    parts = [f"writes {_b(v.written_nbytes)}", f"unique {_b(v.unique_nbytes)}"]
    if v.file_nbytes is not None:
        parts.append(f"file {_b(v.file_nbytes)}" + (" (for archive.pt)" if v.saver == "torch.save" else ""))
    for label, n in (
        ("lost", v.lost_nbytes),
        ("duplicated", v.duplicated_nbytes),
        ("unreferenced", v.unreferenced_nbytes),
    ):
        if n:
            parts.append(f"{label} {_b(n)}")
    return parts


def _verdict_text(v: Verdict, fixes: bool, full: bool = False) -> list[str]:
    lines = [
        f"{v.saver}: {_MARK.get(v.outcome, v.outcome)}" + (f"  [{v.library}]" if v.library else ""),
        f"  call: {v.call}",
    ]
    if v.message:
        head = f"{v.error_type}: " if v.error_type else ""
        msg = " ".join(v.message.split())
        msg = msg if full else elide(msg, _CAP)
        if len(msg) <= _CAP:
            lines += textwrap.wrap(head + msg, 100, initial_indent="  ", subsequent_indent="    ")
        else:  # asked for in full: one long line (wrapping megabytes of names only costs time)
            lines.append("  " + head + msg)
    if v.outcome not in ("raises", "could not evaluate"):
        lines.append(
            f"  kept {len(v.kept)} · dropped: {_names(v.dropped, full=full)} · written as copies: {_names(v.cloned, full=full)}"
        )
    if v.renamed:
        lines.append(f"  renamed: {renames(v.renamed)}")
    if v.ignored:
        lines.append(f"  ignored on save by the model's own rule: {_names(v.ignored, full=full)}")
    if b := _bytes_line(v):
        lines.append(f"  {b}")
    if v.anchor:
        lines.append(f"  {v.anchor_name} groups: " + "; ".join("{" + ", ".join(g) + "}" for g in v.anchor))
    for m in v.misfires:
        lines.append(f"  library: {m.library}")
        lines.append(f"  tensorviz: {m.tensorviz}")
    for log in v.logs:
        lines.append(f"  logs: {log}")
    for note in v.notes:
        lines.append(f"  note: {note}")
    if fixes:
        for i, f in enumerate(v.fixes, 1):
            lines.append(f"  fix {i}: {f.title or f.problem}")
            if f.note:
                lines += textwrap.wrap(f.note, 100, initial_indent="    ", subsequent_indent="    ")
            lines += ["    | " + ln for ln in f.code().splitlines()]
    return lines


#: Longest line of a save-check text (a message, a line of code) unless the user asks for all.
_CAP = 4 * LINE_CAP


def report_text(report: ReportFacts, fixes: bool = True, full: bool = False) -> str:
    """Every verdict, the ties, and the library versions, as plain text.

    Every line goes through :func:`~tensorviz.core.names.shown`: escaped for a terminal and,
    unless ``full``, elided (each name to ``LINE_CAP`` characters, each line to four times that).
    """
    lines = [
        f"Save check of {report.source}: {len(report.verdicts)} saver(s), "
        f"unique tensor bytes {_b(report.unique_nbytes)}"
    ]
    for note in report.notes:
        lines.append(f"note: {note}")
    lines += [f"not run: {', '.join(savers)} ({why})" for why, savers in not_run_by_reason(report.not_run)]
    for v in report.verdicts:
        lines.append("")
        lines += _verdict_text(v, fixes, full)
    if report.ties is not None:
        lines.append("")
        lines += _ties_text(report.ties, full)
    lines.append("")
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in report.versions))
    return "\n".join(shown(line, full, _CAP) for line in lines)  # names are data: none acts on a terminal


def _ties_text(ties, full: bool = False) -> list[str]:
    lines = ["ties (storage / Python object / declared):"]
    if not ties.groups:
        lines.append("  none")
    for g in ties.groups:
        first = shown(g.names[0], full)
        rel = ", ".join(f"{shown(n, full)} {r} {first}" for n, r in zip(g.names[1:], g.relations[1:]) if r)
        lines.append(
            f"  {{{', '.join(shown(n, full) for n in g.names)}}}: storage {_yes(g.storage)} · object {_yes(g.object)} · "
            f"declared {_yes(g.declared)}" + (f"  ({rel})" if rel else "")
        )
    lines.append(f"  object ties from {ties.object_source}; declared ties from {ties.declared_source}")
    for k, val in ties.config:
        lines.append(f"  {k} = {val}")
    for m in ties.mismatches:
        lines.append(f"  MISMATCH {m}")
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
