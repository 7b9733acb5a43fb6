"""The save check's records: :class:`Verdict` per saver (gathered in a
:class:`~tensorviz.savecheck.report.SaveReport`),
:class:`Misfire` where a library's own check is wrong, :class:`Fix` with code that repairs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tensorviz.savecheck.outcomes import OUTCOMES, SAVERS

__all__ = ["ReportFacts", "Verdict", "Misfire", "Fix", "OUTCOMES", "SAVERS", "not_run_by_reason"]


@dataclass(frozen=True)
class Misfire:
    """Where a library's sharing check disagrees with the exact bytes.

    ``library`` says what the library concluded (or how its check failed); ``tensorviz`` gives
    the exact relation of those names, from their footprints.
    """

    names: tuple[str, ...]
    library: str
    tensorviz: str


@dataclass(frozen=True)
class Fix:
    """Code that fixes one problem, and code that reads the weights back.

    ``save_code`` uses the free names ``path`` and ``model`` (for a module) or ``state_dict``
    (for a mapping); ``load_code`` defines ``state_dict`` holding every original name again
    (it may use ``path`` and ``model``, a freshly built instance of the same architecture).
    ``problem`` is the problem it fixes (shared by a verdict's fixes); ``title`` says in a few
    words what this fix does, read from its code.
    """

    problem: str
    save_code: str
    load_code: str
    note: str = ""
    path: str = "model.safetensors"
    title: str = ""

    def code(self, path: str | None = None) -> str:
        """The save code, ready to paste (``path`` assigned first; default :attr:`path`)."""
        return f"path = {path or self.path!r}\n{self.save_code}"


@dataclass(frozen=True)
class Verdict:
    """What one saver would do.

    Attributes:
        saver: key in :data:`SAVERS`; ``call`` the call it stands for; ``library`` name and version.
        outcome: one of :data:`OUTCOMES`; ``problems`` every outcome that applies, worst first.
        error_type, message: the exception the library would raise, its exact message.
        kept, dropped, cloned: names written; names the saver leaves out; names written as a copy
            (``.contiguous()``/``.clone()``) rather than as a view of their storage.
        renamed: ``(given name, name written)`` pairs, from the saver's own renaming rule
            (transformers' weight conversions); a given name split into several appears in each.
        ignored: names the model's own rule leaves out on save (``_keys_to_ignore_on_save``)
            that its ``_init_weights`` computes again on load (replayed on a meta twin), so no
            data is lost; an ignored name it re-initialises or leaves as ``__init__`` made it is
            in ``dropped``, its bytes lost.
        written_nbytes: tensor bytes the saver writes (torch.save: whole storages).
        file_nbytes: exact file size(s) when known (safetensors; torch.save for ``archive.pt``).
        unique_nbytes: distinct bytes the given tensors read.
        lost_nbytes: bytes read by some given name that no longer come back on load.
        duplicated_nbytes: bytes written more than once; ``unreferenced_nbytes``: bytes written that
            no given name reads.
        anchor: the groups the library's own sharing check reported (None if it raised or has none),
            ``anchor_name`` the function that made them.
        misfires: where that check is wrong about the bytes; ``logs``: what the library would log;
        notes: further facts; ``fixes``: code for each problem.
    """

    saver: str
    call: str
    library: str
    outcome: str
    problems: tuple[str, ...] = ()
    error_type: str = ""
    message: str = ""
    kept: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    ignored: tuple[str, ...] = ()
    cloned: tuple[str, ...] = ()
    written_nbytes: int | None = None
    file_nbytes: int | None = None
    unique_nbytes: int = 0
    lost_nbytes: int = 0
    duplicated_nbytes: int = 0
    unreferenced_nbytes: int = 0
    anchor: tuple[tuple[str, ...], ...] | None = None
    anchor_name: str = ""
    misfires: tuple[Misfire, ...] = ()
    logs: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class ReportFacts(Protocol):
    """What the text and HTML renderings read of a :class:`~tensorviz.savecheck.report.SaveReport`
    (which satisfies it; naming the reads here keeps them below the report, which calls them)."""

    @property
    def source(self) -> str: ...
    @property
    def verdicts(self) -> tuple[Verdict, ...]: ...
    @property
    def versions(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def unique_nbytes(self) -> int: ...
    @property
    def ties(self) -> Any: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def not_run(self) -> tuple[tuple[str, str], ...]: ...


def not_run_by_reason(not_run: tuple[tuple[str, str], ...]) -> list[tuple[str, list[str]]]:
    """The savers not run, gathered by reason (in the order first met).

    >>> not_run_by_reason((("a", "x missing"), ("b", "y"), ("c", "x missing")))
    [('x missing', ['a', 'c']), ('y', ['b'])]
    """
    out: dict[str, list[str]] = {}
    for saver, why in not_run:
        out.setdefault(why, []).append(saver)
    return list(out.items())
