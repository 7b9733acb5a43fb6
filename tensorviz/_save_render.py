"""Plain text and escaped, script-free HTML for a :class:`~tensorviz.saving.SaveReport`."""

from __future__ import annotations

import html
import textwrap
from typing import TYPE_CHECKING, Iterable

from ._units import format_bytes

if TYPE_CHECKING:
    from .saving import SaveReport, Verdict

__all__ = ["report_text", "report_html"]

_MARK = {"ok": "ok", "raises": "RAISES", "drops data": "DROPS DATA", "duplicates bytes": "DUPLICATES BYTES",
         "writes unreferenced bytes": "WRITES UNREFERENCED BYTES", "could not evaluate": "could not evaluate"}


def _b(n: int | None) -> str:
    return "—" if n is None else f"{format_bytes(n)} ({n} B)" if n >= 1024 else f"{n} B"


def _names(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    more = f" … +{len(names) - limit}" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"


def _bytes_line(v: "Verdict") -> str:
    return " · ".join(_bytes_parts(v))


def _bytes_parts(v: "Verdict") -> list[str]:
    if v.outcome == "could not evaluate":
        return []
    parts = [f"writes {_b(v.written_nbytes)}", f"unique {_b(v.unique_nbytes)}"]
    if v.file_nbytes is not None:
        parts.append(f"file {_b(v.file_nbytes)}" + (" (for archive.pt)" if v.saver == "torch.save" else ""))
    for label, n in (("lost", v.lost_nbytes), ("duplicated", v.duplicated_nbytes),
                     ("unreferenced", v.unreferenced_nbytes)):
        if n:
            parts.append(f"{label} {_b(n)}")
    return parts


def _verdict_text(v: "Verdict", fixes: bool) -> list[str]:
    lines = [f"{v.saver}: {_MARK.get(v.outcome, v.outcome)}" + (f"  [{v.library}]" if v.library else ""),
             f"  call: {v.call}"]
    if v.message:
        head = f"{v.error_type}: " if v.error_type else ""
        msg = " ".join(v.message.split())
        lines += textwrap.wrap(head + msg, 100, initial_indent="  ", subsequent_indent="    ")
    if v.outcome not in ("raises", "could not evaluate"):
        lines.append(f"  kept {len(v.kept)} · dropped: {_names(v.dropped)} · written as copies: {_names(v.cloned)}")
    if (b := _bytes_line(v)):
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
            lines.append(f"  fix {i}" + (f" ({f.note})" if f.note else "") + ":")
            lines += ["    | " + ln for ln in f.code().splitlines()]
    return lines


def report_text(report: "SaveReport", fixes: bool = True) -> str:
    """Every verdict, the ties, and the library versions, as plain text."""
    lines = [f"Save check of {report.source}: {len(report.verdicts)} saver(s), "
             f"unique tensor bytes {_b(report.unique_nbytes)}"]
    for note in report.notes:
        lines.append(f"note: {note}")
    for v in report.verdicts:
        lines.append("")
        lines += _verdict_text(v, fixes)
    if report.ties is not None:
        lines.append("")
        lines += _ties_text(report.ties)
    lines.append("")
    lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in report.versions))
    return "\n".join(lines)


def _ties_text(ties) -> list[str]:
    lines = ["ties (storage / Python object / declared):"]
    if not ties.groups:
        lines.append("  none")
    for g in ties.groups:
        rel = ", ".join(f"{n} {r} {g.names[0]}" for n, r in zip(g.names[1:], g.relations[1:]) if r)
        lines.append(f"  {{{', '.join(g.names)}}}: storage {_yes(g.storage)} · object {_yes(g.object)} · "
                     f"declared {_yes(g.declared)}" + (f"  ({rel})" if rel else ""))
    lines.append(f"  object ties from {ties.object_source}; declared ties from {ties.declared_source}")
    for k, val in ties.config:
        lines.append(f"  {k} = {val}")
    for m in ties.mismatches:
        lines.append(f"  MISMATCH {m}")
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


# -- HTML -------------------------------------------------------------------------------------------
_CSS = """<style>
.tv-save{font-family:var(--jp-content-font-family,sans-serif);font-size:13px;color:var(--jp-content-font-color1,#111)}
.tv-save table{border-collapse:collapse;margin:4px 0}
.tv-save th,.tv-save td{border:1px solid var(--jp-border-color2,#ccc);padding:3px 6px;text-align:left;vertical-align:top}
.tv-save th{background:var(--jp-layout-color2,#f3f3f3)}
.tv-save .tv-ok{font-weight:bold;color:#1a7f37}
.tv-save .tv-bad{font-weight:bold;color:#b3261e;text-decoration:underline}
.tv-save .tv-msg{font-family:var(--jp-code-font-family,monospace);font-size:12px;white-space:pre-wrap;max-width:46em}
.tv-save pre{background:var(--jp-layout-color2,#f6f6f6);padding:4px;margin:2px 0;font-size:12px}
.tv-save .tv-bytes{white-space:nowrap}
.tv-save .tv-note{color:var(--jp-content-font-color2,#555)}
</style>"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _cell(v: "Verdict") -> str:
    cls = "tv-ok" if v.ok else "tv-bad"
    return f'<span class="{cls}">{_e(v.outcome)}</span>'


def _what(v: "Verdict") -> str:
    parts = []
    if v.message:
        parts.append(f'<div class="tv-msg">{_e((v.error_type + ": ") if v.error_type else "")}{_e(v.message.strip())}</div>')
    if v.outcome not in ("raises", "could not evaluate"):
        parts.append(f"kept {len(v.kept)}; dropped: {_e(_names(v.dropped))}; copies: {_e(_names(v.cloned))}")
    for m in v.misfires:
        parts.append(f"<div><b>library</b>: {_e(m.library)}<br><b>tensorviz</b>: {_e(m.tensorviz)}</div>")
    for log in v.logs:
        parts.append(f'<div class="tv-note">logs: {_e(log)}</div>')
    for note in v.notes:
        parts.append(f'<div class="tv-note">note: {_e(note)}</div>')
    for i, f in enumerate(v.fixes, 1):
        parts.append(f"<details><summary>fix {i}: {_e(f.problem)}</summary>"
                     + (f'<div class="tv-note">{_e(f.note)}</div>' if f.note else "")
                     + f"<pre>{_e(f.code())}</pre><div>load it back:</div><pre>{_e(f.load_code)}</pre></details>")
    return "".join(parts)


def report_html(report: "SaveReport") -> str:
    """A table with one row per saver (outcome, message, names, bytes, fixes), then ties."""
    rows = []
    for v in report.verdicts:
        rows.append(f"<tr><td><b>{_e(v.saver)}</b><br><code>{_e(v.call)}</code><br>"
                    f'<span class="tv-note">{_e(v.library)}</span></td><td>{_cell(v)}</td>'
                    f'<td>{_what(v)}</td><td class="tv-bytes">{"<br>".join(map(_e, _bytes_parts(v)))}</td></tr>')
    notes = "".join(f'<div class="tv-note">note: {_e(n)}</div>' for n in report.notes)
    head = (f"<div><b>Save check of {_e(report.source)}</b>: unique tensor bytes "
            f"{_e(_b(report.unique_nbytes))}</div>{notes}")
    table = ("<table><thead><tr><th>saver</th><th>outcome</th><th>what happens</th><th>bytes</th></tr></thead>"
             f"<tbody>{''.join(rows)}</tbody></table>")
    versions = ", ".join(f"{_e(k)} {_e(v)}" for k, v in report.versions)
    ties = _ties_html(report.ties) if report.ties is not None else ""
    return f'<div class="tv-save">{_CSS}{head}{table}{ties}<div class="tv-note">versions: {versions}</div></div>'


def _ties_html(ties) -> str:
    rows = "".join(
        f"<tr><td>{_e(', '.join(g.names))}</td><td>{_yes(g.storage)}"
        f"{_e(' (' + ', '.join(r for r in g.relations if r) + ')') if any(g.relations) else ''}</td>"
        f"<td>{_yes(g.object)}</td><td>{_yes(g.declared)}</td></tr>" for g in ties.groups)
    if not rows:
        rows = '<tr><td colspan="4">none</td></tr>'
    mism = "".join(f'<div class="tv-bad">mismatch: {_e(m)}</div>' for m in ties.mismatches)
    config = "".join(f'<div class="tv-note">{_e(k)} = {_e(v)}</div>' for k, v in ties.config)
    return ("<div><b>Ties</b></div><table><thead><tr><th>names</th><th>storage</th><th>Python object</th>"
            f"<th>declared</th></tr></thead><tbody>{rows}</tbody></table>"
            f'<div class="tv-note">object ties from {_e(ties.object_source)}; declared ties from '
            f"{_e(ties.declared_source)}</div>{config}{mism}")
