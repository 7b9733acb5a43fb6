"""A matplotlib Figure that Jupyter shows as a picture by itself, with no pyplot and no backend.

A bare ``matplotlib.figure.Figure`` returned to a fresh kernel (no ``%matplotlib inline``, so no
figure formatter registered) displays as ``<Figure size 665x464 with 1 Axes>``. This subclass
adds ``_repr_png_``, so IPython's PNG formatter finds the picture on the object itself. When a
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

import sys

from matplotlib.figure import Figure

__all__ = ["TensorvizFigure", "figure_printer_active"]

#: The mime types a matplotlib backend may register a Figure formatter for in IPython.
_IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg", "application/pdf")


class TensorvizFigure(Figure):
    """A real ``Figure`` (axes, artists, gids as usual) that also displays itself as a PNG."""

    def _repr_png_(self) -> bytes | None:
        """PNG bytes at the figure's size (100 dpi), unless a backend's formatter shows figures."""
        if figure_printer_active():
            return None
        from .mpl import png_bytes

        return png_bytes(self)


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
