"""A displayable diagram: one object whose rich repr works with or without a kernel.

``show(obj)`` renders the diagram once; its ``_repr_mimebundle_`` carries ``image/png``,
escaped ``text/html`` (the picture as an inline SVG that fits the output and follows the
theme, with the PNG's pixels for sanitizers, plus a compact table) and ``text/plain`` (the ASCII lane
map), so a saved notebook still shows the picture in JupyterLab, VS Code and on GitHub.

>>> import torch, tensorviz as tv
>>> shown = tv.show({"w": torch.zeros(4, 4)})
>>> sorted(shown._repr_mimebundle_())
['image/png', 'text/html', 'text/plain']
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from tensorviz.core.layout import Layout, as_layout
from tensorviz.plan.diagram import Diagram, diagram

__all__ = ["show", "Shown"]


@dataclass(frozen=True, eq=False)
class Shown:
    """A rendered diagram: PNG bytes, the Diagram and the Layout it came from."""

    diagram: Diagram
    layout: Layout
    png: bytes
    svg: str = ""  # the inline SVG of the HTML output (tensorviz.render.theme); "" to use the PNG

    @property
    def text(self) -> str:
        return self.diagram.to_text()

    def to_html(self) -> str:
        """A self-contained HTML fragment (inline PNG and table; every name escaped)."""
        from tensorviz.render.html.diagram import diagram_html

        return diagram_html(self.diagram, self.layout, self.png, svg=self.svg)

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        bundle = {
            "image/png": base64.b64encode(self.png).decode("ascii"),
            "text/html": self.to_html(),
            "text/plain": self.text,
        }
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

    def __repr__(self) -> str:
        return self.text


def show(obj: Any, *, dpi: int = 100, width: float | None = None, **options: Any) -> Any:
    """Render a layout's diagram for display (PNG + HTML table + text).

    Args:
        obj: a :class:`Layout` or anything :func:`tensorviz.analyze` accepts (not a Diagram:
            the table needs the layout), or a ``tv.diff`` result: then the two layouts side by
            side (:mod:`tensorviz.render.diff`; ``max_rows`` is its one option).
        dpi: PNG resolution.
        width: figure width in inches (default 590/96: laid out for a 590-px output, where
            no text is under 9 CSS px; see :mod:`tensorviz.render.theme`): the PNG is
            ``width * dpi`` pixels wide, the HTML's SVG scales with the output.
        **options: :func:`tensorviz.diagram` options (``by``, ``names``, ``max_lanes``, ...).

    Returns:
        A :class:`Shown`; Jupyter displays it, ``.png`` holds the bytes, ``.to_html()`` the HTML.

    Raises:
        ValueError: ``width`` is not a width in inches (e.g. 800, meant as pixels), or a
            diagram option is out of range.

    >>> import torch, tensorviz as tv
    >>> tv.show({"w": torch.zeros(4, 4)}).png[:4]
    b'\\x89PNG'
    """
    from tensorviz.core.diff import LayoutDiff
    from tensorviz.render.mpl import check_width

    width = check_width(width)
    if isinstance(obj, LayoutDiff):  # two layouts side by side (tensorviz.render.diff)
        from tensorviz.render.diff import show_diff

        return show_diff(obj, dpi=dpi, width=width or 10.0, **options)
    if isinstance(obj, Diagram):
        raise TypeError(
            "show() needs the Layout for its table: pass tv.show(layout, ...) or the analysed object, not a Diagram"
        )
    layout = as_layout(obj)
    return static_picture(layout, diagram(layout, **options), dpi=dpi, width=width)


def static_picture(layout: Layout, d: Diagram, *, dpi: int = 100, width: float | None = None) -> Shown:
    """Draw ``d`` once, laid out for a 590-px output (:data:`tensorviz.render.theme.DESIGN_PX`)
    unless ``width`` (inches) is given: its PNG and, for the HTML output, its inline SVG that
    scales with the output and reads the notebook's theme (the PNG alone if the SVG would be
    larger than :data:`tensorviz.render.theme.SVG_LIMIT`)."""
    from tensorviz.render.html.diagram import picture_alt
    from tensorviz.render.mpl import png_bytes, render
    from tensorviz.render.theme import DESIGN_INCHES, SVG_LIMIT, inline_svg

    fig = render(d, width=width or DESIGN_INCHES)
    png = png_bytes(fig, dpi=dpi)
    svg = inline_svg(fig, alt=picture_alt(d), fallback_png=png)
    return Shown(d, layout, png, svg if len(svg) <= SVG_LIMIT else "")
