"""``dcp.load``'s load plan across ranks: each rank's :class:`~tensorviz.loadcheck.report.LoadReport`
(its ``reads``: the saved chunks, files and byte ranges that rank reads) gathered into one
:class:`~tensorviz.plan.loadplan.LoadPlan`, drawn on the checkpoint's global layout
(:mod:`tensorviz.render.loadplan`) and tabled per rank.

In a job, every rank calls ``tv.load_check(sd, folder, loader="dcp.load")`` (a collective, as the
real load), the reports are gathered (``dist.all_gather_object``) and one rank calls
:func:`load_plan` with them in rank order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tensorviz.core.errors import OptionError
from tensorviz.loadcheck.report import LoadReport
from tensorviz.plan.loadplan import LoadPlan, RankRead, RankRow

__all__ = ["load_plan", "LoadPlanReport"]


@dataclass(frozen=True, eq=False)
class LoadPlanReport:
    """The load plan of one ``dcp.load`` across ranks: ``plan`` (the reads, per rank), ``rows()``
    (files, bytes and chunks per rank), ``print(p)``, ``p._repr_html_()`` and :meth:`figure`."""

    plan: LoadPlan

    def rows(self) -> list[RankRow]:
        """Per rank: the files it opens, the bytes it reads, the chunks."""
        return self.plan.rows()

    def figure(self, *, width: float | None = None) -> Any:
        """The checkpoint's global layout with each rank's reads drawn over it (a matplotlib
        Figure; ``width`` in inches)."""
        from tensorviz.render.loadplan import plan_figure
        from tensorviz.sources import analyze

        return plan_figure(analyze(self.plan.folder), self.plan, width=width)

    def __str__(self) -> str:
        from tensorviz.render.loadplan import plan_text

        return plan_text(self.plan)

    def _repr_html_(self) -> str:
        from tensorviz.render.loadplan import plan_html

        return plan_html(self.plan)


def load_plan(reports: Sequence[LoadReport]) -> LoadPlanReport:
    """The load plan of ``reports``: one ``dcp.load`` report per rank, in rank order, all of one
    checkpoint folder.

    Raises:
        OptionError: no report, a report of another loader, or of another folder.
    """
    reports = list(reports)
    if not reports:
        raise OptionError("load_plan needs one dcp.load report per rank (tv.load_check(..., loader='dcp.load'))")
    for rank, r in enumerate(reports):
        if not isinstance(r, LoadReport) or r.loader != "dcp.load":
            what = r.loader if isinstance(r, LoadReport) else type(r).__name__
            raise OptionError(f"load_plan: report {rank} is of {what!r}, not of loader='dcp.load'")
        if r.source != reports[0].source:
            raise OptionError(f"load_plan: report {rank} loads {r.source!r}, report 0 {reports[0].source!r}")
    reads = tuple(RankRead(rank, c.name, c.file, c.offset, c.length) for rank, r in enumerate(reports) for c in r.reads)
    return LoadPlanReport(LoadPlan(reports[0].source, len(reports), reads))
