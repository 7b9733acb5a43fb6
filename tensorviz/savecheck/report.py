"""Save check: what safetensors, torch.save, transformers and accelerate would do with these tensors.

A dry run, metadata only: no file is written and no tensor byte is read. Each installed saver
gets one :class:`Verdict`, decided by that library's own helper functions (run on data-free
stand-ins, see :mod:`tensorviz.savecheck.standin`), so the verdict follows the installed version. Beside
it, tensorviz's exact reading of the bytes (from the :class:`~tensorviz.core.layout.Layout`) shows
where the library's reasoning is wrong (``misfires``) and what each outcome costs in bytes,
and every problem comes with code that fixes it (``fixes``), checked by the test-suite.

>>> import torch, tensorviz as tv
>>> w = torch.zeros(4, 4)
>>> report = tv.save_check({"w": w, "wt": w.t()})
>>> report["safetensors.save_file"].outcome
'raises'
>>> report["torch.save"].outcome, report["torch.save"].written_nbytes
('ok', 64)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from tensorviz.core.errors import OptionError
from tensorviz.core.keywords import did_you_mean
from tensorviz.core.rows import gc_paused
from tensorviz.savecheck import accounting as acc
from tensorviz.savecheck.check import run_check, versions
from tensorviz.savecheck.html import report_html
from tensorviz.savecheck.outcomes import OUTCOMES, SAVERS
from tensorviz.savecheck.text import report_text
from tensorviz.savecheck.verdicts import Fix, Misfire, Verdict

__all__ = ["save_check", "SaveReport", "Verdict", "Misfire", "Fix", "OUTCOMES", "SAVERS"]


def save_check(obj: Any, *, savers: Iterable[str] | None = None) -> SaveReport:
    """What each installed saver would do with ``obj``: a dry run from metadata only.

    Args:
        obj: an ``nn.Module`` (a transformers ``PreTrainedModel`` adds ``save_pretrained``, a peft
            ``PeftModel`` its adapter-only ``save_pretrained``), a
            mapping of names to tensors (a state dict), a :class:`~tensorviz.core.layout.Layout`, or
            anything :func:`tensorviz.analyze` accepts (paths included).
        savers: keys of :data:`SAVERS` to check (default: every installed saver that applies).
            A saver whose library is not installed is listed in ``not_run`` with the reason and
            the ``pip install`` that adds it; so is one named here that does not apply.

    Returns:
        A :class:`SaveReport`. It keeps no reference to any tensor or module.

    Raises:
        ValueError: an unknown saver key (the message lists the known ones).

    >>> import torch, tensorviz as tv
    >>> emb = torch.nn.Embedding(10, 4); head = torch.nn.Linear(4, 10, bias=False)
    >>> head.weight = emb.weight
    >>> r = tv.save_check(torch.nn.ModuleDict({"emb": emb, "head": head}))
    >>> r["safetensors.save_file"].outcome, r["safetensors.save_model"].dropped
    ('raises', ('head.weight',))
    """
    wanted = _wanted(savers)
    with gc_paused():  # thousands of stand-ins and records: no collector pass over the caller's heap
        return _report(obj, wanted, asked=savers is not None)


def _report(obj: Any, wanted: tuple[str, ...], asked: bool) -> SaveReport:
    """The report of one check. The subject (stand-ins, layout, records) is freed when this
    returns, while the collector is still paused: none of it waits for a collector pass."""
    verdicts, subject = run_check(obj, wanted)
    return SaveReport(
        source=subject.source,
        verdicts=verdicts,
        versions=versions(),
        unique_nbytes=acc.unique_nbytes(subject.layout),
        ties=subject.ties,
        notes=tuple(subject.notes) + acc.bound_notes(subject.layout),
        not_run=tuple((k, why) for k, why in subject.not_run if asked or " is not installed: " in why),
    )


@dataclass(frozen=True)
class SaveReport:
    """One :class:`Verdict` per installed saver, the three kinds of tie, and library versions.

    ``report["torch.save"]`` is a verdict by saver key; ``to_text()``, ``to_html()`` and
    ``to_dict()`` are the stable renderings (the explorer pane and the CLI use them).
    """

    source: str
    verdicts: tuple[Verdict, ...]
    versions: tuple[tuple[str, str], ...]
    unique_nbytes: int
    ties: Any = None
    notes: tuple[str, ...] = ()
    not_run: tuple[tuple[str, str], ...] = ()  # (saver, why): not installed, or asked for and not applicable

    def __getitem__(self, saver: str) -> Verdict:
        for v in self.verdicts:
            if v.saver == saver:
                return v
        raise KeyError(f"no verdict for {saver!r}; this report has {[v.saver for v in self.verdicts]}")

    def __iter__(self):
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    @property
    def ok(self) -> bool:
        """Every saver would write every byte once and nothing else."""
        return all(v.ok for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-friendly data (lists and dicts only)."""
        out = asdict(self)
        out["versions"] = dict(self.versions)
        out["ties"] = self.ties.to_dict() if self.ties is not None else None
        return _jsonable(out)

    def to_text(self, fixes: bool = True, full: bool = False) -> str:
        """A plain-text report: one block per saver, then ties, fixes and versions.

        Args:
            fixes: include the code that fixes each problem.
            full: keep every name and line whole (by default very long names and lines are
                elided, and at most eight names are listed per line).
        """
        return report_text(self, fixes=fixes, full=full)

    def to_html(self) -> str:
        """A self-contained, escaped HTML table (no scripts, no images)."""
        return report_html(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        parts = ", ".join(f"{v.saver}: {v.outcome}" for v in self.verdicts)
        return f"<SaveReport {self.source}: {parts}>"

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {"text/plain": self.to_text(), "text/html": self.to_html()}
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle


def _wanted(savers: Iterable[str] | None) -> tuple[str, ...]:
    if savers is None:
        return tuple(SAVERS)
    if isinstance(savers, str):
        savers = (savers,)
    savers = tuple(savers)
    unknown = [s for s in savers if s not in SAVERS]
    if unknown:
        raise OptionError(f"unknown saver(s) {unknown}; choose from {list(SAVERS)}{did_you_mean(unknown[0], SAVERS)}")
    return savers


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in x]
    return x
