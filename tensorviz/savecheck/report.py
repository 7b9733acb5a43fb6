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
from typing import Any

from tensorviz.core.rows import gc_paused
from tensorviz.savecheck.check import run_check
from tensorviz.savecheck.outcomes import OUTCOMES, SAVERS
from tensorviz.savecheck.verdicts import Fix, Misfire, SaveReport, Verdict

__all__ = ["save_check", "SaveReport", "Verdict", "Misfire", "Fix", "OUTCOMES", "SAVERS"]


def save_check(obj: Any, *, savers: Iterable[str] | None = None) -> SaveReport:
    """What each installed saver would do with ``obj``: a dry run from metadata only.

    Args:
        obj: an ``nn.Module`` (a transformers ``PreTrainedModel`` adds ``save_pretrained``, a peft
            ``PeftModel`` its adapter-only ``save_pretrained``), a
            mapping of names to tensors (a state dict), a :class:`~tensorviz.core.layout.Layout`, or
            anything :func:`tensorviz.analyze` accepts (paths included).
        savers: keys of :data:`SAVERS` to check (default: every installed, applicable saver).

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
        return run_check(obj, wanted)


def _wanted(savers: Iterable[str] | None) -> tuple[str, ...]:
    if savers is None:
        return tuple(SAVERS)
    if isinstance(savers, str):
        savers = (savers,)
    savers = tuple(savers)
    unknown = [s for s in savers if s not in SAVERS]
    if unknown:
        raise ValueError(f"unknown saver(s) {unknown}; choose from {list(SAVERS)}")
    return savers
