"""A matplotlib Figure that Jupyter shows as a picture by itself, with no pyplot and no backend.

A bare ``matplotlib.figure.Figure`` returned to a fresh kernel (no ``%matplotlib inline``, so no
figure formatter registered) displays as ``<Figure size 665x464 with 1 Axes>``. This subclass
adds ``_repr_png_``, so IPython's PNG formatter finds the picture on the object itself, and
``_repr_html_``: the same picture as an inline SVG that fits the output (JupyterLab shows the
HTML; readers that drop HTML, the PNG). When a
matplotlib backend *has* registered a formatter for ``Figure`` (``%matplotlib inline`` does, for
``png`` or whichever ``figure_formats`` it was given), IPython uses that one: a type-registered
printer wins over the method for its own mime type, and for the other image types the method
steps aside (returns None), so a figure is never drawn and sent twice.

Imports matplotlib at module top: import it only from functions that draw.

>>> fig = TensorvizFigure(figsize=(2, 1))
>>> fig._repr_png_()[:4]
b'\\x89PNG'
"""

from __future__ import annotations

import io
import sys
from typing import Any

from matplotlib.figure import Figure

__all__ = ["TensorvizFigure", "figure_printer_active", "png_bytes", "literal_texts", "figure_html"]

#: The mime types a matplotlib backend may register a Figure formatter for in IPython.
_IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg", "application/pdf")


class TensorvizFigure(Figure):
    """A real ``Figure`` (axes, artists, gids as usual) that also displays itself as a PNG."""

    tensorviz_plan: Any  # the teaching panel's plan (tensorviz.render.mpl.panel)
    tensorviz_diagram: Any  # the Diagram drawn (tensorviz.render.mpl)

    def _repr_png_(self) -> bytes | None:
        """PNG bytes at the figure's size (100 dpi), unless a backend's formatter shows figures."""
        if figure_printer_active():
            return None
        return png_bytes(self)

    def _repr_html_(self) -> str | None:
        """The figure as an inline SVG that scales with the output, never so small that its
        text is under 9 CSS px (:mod:`tensorviz.render.theme`); None where a backend's
        formatter shows figures, or when the SVG would be too large (the PNG shows then)."""
        if figure_printer_active():
            return None
        drawn = getattr(self, "tensorviz_diagram", None)
        if drawn is not None:
            from tensorviz.render.html.diagram import picture_alt

            return figure_html(self, alt=picture_alt(drawn))
        return figure_html(self, alt="tensorviz figure")


def figure_html(fig: Figure, *, alt: str) -> str | None:
    """``fig`` as an HTML output: its inline SVG (:func:`tensorviz.render.theme.inline_svg`, the PNG's pixels kept for
    sanitizers) in a box that scrolls sideways below the SVG's minimum width; None when the SVG
    would be larger than :data:`tensorviz.render.theme.SVG_LIMIT` (the PNG is then the picture)."""
    from tensorviz.render.theme import SVG_LIMIT, inline_svg

    svg = inline_svg(fig, alt=alt, fallback_png=png_bytes(fig))
    if len(svg) > SVG_LIMIT:
        return None
    return f'<div class="tensorviz-figure" style="max-width:100%;overflow-x:auto">{svg}</div>'


def literal_texts(fig: Figure) -> Figure:
    """Make every text of ``fig`` literal: names are data, so ``$\\frac{a}{b}$`` is drawn as
    typed, not as mathtext (``$\\undefined$`` would raise when drawn), and control, bidi and
    zero-width characters and lone surrogates are drawn as visible escapes (``\\x1b``,
    ``\\u202e``). Call it once the texts exist, before drawing; returns ``fig``."""
    from matplotlib.text import Text

    from tensorviz.core.names import drawable

    for text in fig.findobj(Text):
        text.set_parse_math(False)
        raw = text.get_text()
        shown = drawable(raw)
        if shown is not raw:
            text.set_text(shown)
    return fig


def figure_printer_active() -> bool:
    """Whether the running IPython has a formatter registered for matplotlib figures (e.g.
    ``%matplotlib inline``), which then displays them itself. False outside IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    formatters = shell.display_formatter.formatters
    for mime in _IMAGE_TYPES:
        formatter = formatters.get(mime)
        if formatter is None:
            continue
        try:
            formatter.lookup_by_type(Figure)
        except KeyError:
            continue
        return True
    return False


def png_bytes(fig: Figure, *, dpi: int = 100, compress_level: int = 6) -> bytes:
    """PNG bytes of a figure: drawn with Agg at ``dpi`` and encoded as RGB.

    Faster than ``savefig`` with the same look: an opaque figure is encoded without its alpha
    channel (a quarter less data to compress). It draws under matplotlib's rcParams as the user
    left them: a ``mpl.rc_context`` (unhinted glyphs drew about a third faster) swaps a
    process-wide setting, which concurrent draws and the user's own changes would see. ``compress_level`` 1 makes ~10 % larger files in a fifth of the zlib
    time (for redraws, as in the explorer). The figure's canvas and dpi are left as they were.

    >>> png_bytes(TensorvizFigure(figsize=(2, 1)), compress_level=1)[:4]
    b'\x89PNG'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    old_canvas, old_dpi = fig.canvas, fig.dpi
    canvas = FigureCanvasAgg(fig)
    try:
        fig.dpi = dpi
        canvas.draw()  # under the user's rcParams as they are: never a process-wide rc_context
        image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        if fig.patch.get_alpha() in (None, 1) and fig.patch.get_facecolor()[3] == 1:  # type: ignore[misc]  # RGBA (the stubs say 3)
            image = image.convert("RGB")
        buf = io.BytesIO()
        image.save(buf, format="png", compress_level=compress_level)
        return buf.getvalue()
    finally:
        fig.dpi = old_dpi
        fig.set_canvas(old_canvas)
