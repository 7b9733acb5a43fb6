"""Text of a :class:`~tensorviz.core.layout.Layout` and its module tree (a mixin it inherits):
``print(layout)``, ``layout.to_text(full=...)`` and ``layout.tree()``.
"""

from __future__ import annotations

from tensorviz.core.records import GroupBy


class TextFacts:
    """The text answers; mixed into :class:`Layout`."""

    __slots__ = ()

    def to_text(self, by: GroupBy = "storage", max_views: int | None = None, full: bool | None = None) -> str:
        """A plain-text summary: storages with their views and coverage, shared groups, skips.

        ``full=None`` (what ``print(layout)`` writes) lists everything when that fits in 60
        lines, else writes a compact summary (totals, ties, shared groups, the largest modules);
        ``full=True`` always lists every storage and view, ``full=False`` always summarises.
        ``max_views`` caps the views listed per storage (default 12; all when ``full=True``).
        """
        from tensorviz.core import summary

        if full:
            return summary.layout_text(self, by=by, max_views=len(self) if max_views is None else max_views)
        text = None if full is False else summary.fits_screen(self, by, 12 if max_views is None else max_views)
        return text if text is not None else summary.compact_text(self, by=by)

    def tree(self):
        """The module tree: totals per prefix, bytes counted once (see :mod:`tensorviz.core.tree`)."""
        from tensorviz.core.tree import model_tree

        return self._cached("tree", lambda: model_tree(self))

    def __str__(self) -> str:
        return self.to_text()
