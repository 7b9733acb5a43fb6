"""The load check's records: :class:`LoadReport` (what one loader call would do) and
:class:`Conflict`, with their text and escaped HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from tensorviz.core.names import elide, terminal

__all__ = ["LoadReport", "Conflict", "ChunkRead", "Fix", "NARROWING"]

#: (source dtype, model dtype) pairs where a copy loses range or precision.
_FLOAT_BITS = {"float64": 64, "float32": 32, "bfloat16": 16, "float16": 16, "float8_e4m3fn": 8, "float8_e5m2": 8}


def NARROWING(source: str, model: str) -> bool:  # noqa: N802 (a rule, named as a constant)
    """A cast that loses range or precision: to fewer float bits, bfloat16 <-> float16, float to int."""
    if source in _FLOAT_BITS and model in _FLOAT_BITS:
        return _FLOAT_BITS[model] < _FLOAT_BITS[source] or {source, model} == {"bfloat16", "float16"}
    return source in _FLOAT_BITS and model not in _FLOAT_BITS and model != "bool"


@dataclass(frozen=True)
class Conflict:
    """Model tensors sharing bytes (a tie, or views of one buffer) fed by different source
    tensors; ``winner`` is the name whose source ends up in the shared bytes (torch copies in
    state-dict order, so the last one fed)."""

    names: tuple[str, ...]
    winner: str


@dataclass(frozen=True)
class Fix:
    """A suggested fix: what it addresses and the code to paste (it ends with the load); for
    ``from_pretrained``, ``keywords`` are the call's keywords after the fix."""

    title: str
    code: str
    keywords: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class ChunkRead:
    """``dcp.load``: one saved chunk a target tensor reads: the saved chunk's offsets, the
    elements copied (``lengths`` at ``dest_offsets`` of the target), and where its bytes are."""

    name: str
    saved_offsets: tuple[int, ...]
    dest_offsets: tuple[int, ...]
    lengths: tuple[int, ...]
    file: str
    offset: int
    length: int


@dataclass(frozen=True, eq=False)
class LoadReport:
    """What ``loader`` would do when loading ``source`` into ``model`` (see DESIGN.md, "v0.3
    additions"): whether it raises and with what message (the library's own wording), missing
    and unexpected keys as the library computes them, shape mismatches ``(name, model shape,
    source shape)``, dtype casts ``(name, source dtype, model dtype)``, conflicts, tensors the
    load leaves untouched, and (``assign=True``) ties the assignment breaks."""

    loader: str
    model: str
    source: str
    strict: bool
    assign: bool
    raises: bool
    error: str | None
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    mismatched: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
    cast: tuple[tuple[str, str, str], ...]
    conflicts: tuple[Conflict, ...]
    untouched: tuple[str, ...]
    ties_broken: tuple[frozenset[str], ...] = ()
    retied: tuple[tuple[str, str], ...] = ()
    not_tied: tuple[tuple[str, str], ...] = ()
    reads: tuple[ChunkRead, ...] = ()
    uncovered: tuple[tuple[str, int], ...] = ()
    keywords: str = ""
    fixes: tuple[Fix, ...] = ()

    @property
    def files_read(self) -> dict[str, int]:
        """``dcp.load``: bytes read per checkpoint file (each saved chunk read once)."""
        out: dict[str, int] = {}
        for c in {(r.file, r.offset, r.length) for r in self.reads}:
            out[c[0]] = out.get(c[0], 0) + c[2]
        return dict(sorted(out.items()))

    @property
    def narrowing(self) -> tuple[tuple[str, str, str], ...]:
        """The casts that lose range or precision (fp32 -> bf16/fp16/fp8, float -> int)."""
        return tuple(c for c in self.cast if NARROWING(c[1], c[2]))

    @property
    def clean(self) -> bool:
        """No raise, nothing missing, unexpected, mismatched, conflicting or left untouched."""
        facts: tuple[tuple, ...] = (self.missing, self.unexpected, self.mismatched, self.conflicts, self.untouched)
        facts += (self.ties_broken, self.not_tied, self.uncovered)
        return not self.raises and not any(facts)

    def to_text(self, *, width: int = 80, limit: int = 8) -> str:
        """A screen of text: the verdict, then each non-empty list (``limit`` lines each)."""
        how = f"{self.loader}(strict={self.strict}{', assign=True' if self.assign else ''})"
        if self.loader == "from_pretrained":
            how = f"from_pretrained({self.keywords})"
        lines = [elide(f"{how}: {terminal(self.source)} -> {terminal(self.model)}", width)]
        first = self.error_line
        lines.append("raises: " + elide(terminal(first), width - 8) if self.raises else "does not raise")
        for title, items in self._sections():
            lines.append(f"{title} ({len(items)}):")
            lines += ["  " + elide(terminal(x), width - 2) for x in items[:limit]]
            if len(items) > limit:
                lines.append(f"  … {len(items) - limit} more")
        if self.fixes:
            lines.append(f"fixes ({len(self.fixes)}), code to paste:")
            for f in self.fixes:
                lines.append("  " + elide(terminal("# " + f.title), width - 2))
                lines += ["    " + terminal(line) for line in f.code.splitlines()]
        lines.append("clean" if self.clean else "not clean")
        return "\n".join(lines)

    def _sections(self) -> list[tuple[str, list[str]]]:
        out = [
            ("missing", list(self.missing)),
            ("unexpected", list(self.unexpected)),
            ("shape mismatch (model ← source)", [f"{n}  {list(m)} ← {list(s)}" for n, m, s in self.mismatched]),
            (
                "cast (source → model)",
                [f"{n}  {s} → {m}{'  (narrowing)' if NARROWING(s, m) else ''}" for n, s, m in self.cast],
            ),
            (
                "conflicts: shared bytes fed twice",
                [f"{' = '.join(c.names)}  winner: {c.winner}" for c in self.conflicts],
            ),
            (self._untouched_title, list(self.untouched)),
            ("ties broken by assign=True", [" = ".join(sorted(g)) for g in self.ties_broken]),
            ("tied after the load (target = source)", [f"{t} = {s}" for t, s in self.retied]),
            ("not tied: both in the files, different values", [f"{t} ≠ {s}" for t, s in self.not_tied]),
            ("regions no saved chunk covers (elements)", [f"{n}  {k:,}" for n, k in self.uncovered]),
            ("bytes read per file", [f"{f}  {n:,} B" for f, n in self.files_read.items()]),
        ]
        return [(t, items) for t, items in out if items]

    @property
    def error_line(self) -> str:
        """The error's first line; for DCP's ``CheckpointException`` (a header, then each rank's
        traceback) the line that says what went wrong: the traceback's last."""
        lines = [line for line in (self.error or "").splitlines() if line.strip()]
        if not lines:
            return ""
        return lines[-1] if lines[0].startswith("CheckpointException") else lines[0]

    @property
    def _untouched_title(self) -> str:
        if self.loader == "from_pretrained":
            return "newly initialized (random, not from the files)"
        return "untouched (keep their initial values)"

    def __str__(self) -> str:
        return self.to_text()

    def to_json(self) -> dict:
        """Plain JSON data (schema ``tensorviz.load_check``, version 1)."""
        return {
            "schema": "tensorviz.load_check",
            "version": 1,
            "loader": self.loader,
            "model": self.model,
            "source": self.source,
            "strict": self.strict,
            "assign": self.assign,
            "keywords": self.keywords,
            "raises": self.raises,
            "error": self.error,
            "clean": self.clean,
            "missing": list(self.missing),
            "unexpected": list(self.unexpected),
            "mismatched": [[n, list(m), list(s)] for n, m, s in self.mismatched],
            "cast": [list(c) for c in self.cast],
            "narrowing": [list(c) for c in self.narrowing],
            "conflicts": [{"names": list(c.names), "winner": c.winner} for c in self.conflicts],
            "untouched": list(self.untouched),
            "ties_broken": [sorted(g) for g in self.ties_broken],
            "retied": [list(p) for p in self.retied],
            "not_tied": [list(p) for p in self.not_tied],
            "uncovered": [list(p) for p in self.uncovered],
            "files_read": self.files_read,
            "fixes": [{"title": f.title, "code": f.code, "keywords": [k for k, _ in f.keywords]} for f in self.fixes],
            "reads": [
                {
                    "name": r.name,
                    "saved_offsets": list(r.saved_offsets),
                    "dest_offsets": list(r.dest_offsets),
                    "lengths": list(r.lengths),
                    "file": r.file,
                    "offset": r.offset,
                    "length": r.length,
                }
                for r in self.reads
            ],
        }

    def _repr_html_(self) -> str:
        esc = lambda s: html.escape(terminal(str(s)))  # noqa: E731
        verdict = f"raises: <code>{esc(self.error_line)}</code>" if self.raises else "does not raise"
        parts = [f'<div class="tv-loadcheck"><p><b>{esc(self.loader)}</b>: {verdict}</p>']
        for title, items in self._sections():
            rows = "".join(f"<li><code>{esc(x)}</code></li>" for x in items[:200])
            parts.append(f"<details open><summary>{esc(title)} ({len(items)})</summary><ul>{rows}</ul></details>")
        for f in self.fixes:
            parts.append(
                f"<details open><summary>fix: {esc(f.title)}</summary><pre>{chr(10).join(map(esc, f.code.splitlines()))}</pre></details>"
            )
        return "".join(parts) + "</div>"
