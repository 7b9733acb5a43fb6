"""Static pictures that fit the output and read the notebook's theme: an inline SVG.

**Why SVG, inline, glyphs as paths.** A PNG has its pixels fixed: a 1000-px diagram shown in a
590-px output (JupyterLab at 1024 px with the file browser open) is scaled to 59 % and its 8-pt
labels become ~5 px. An SVG scales with the output, and is laid out here for the narrowest
width it is meant for (:data:`DESIGN_PX`), so no text is smaller than :data:`MIN_LABEL_PX` CSS
pixels there; wider outputs enlarge it up to :data:`MAX_SCALE` times. How each route shows it:

- JupyterLab prefers ``text/html`` (rank 50) over ``image/svg+xml`` (80) and ``image/png`` (90),
  and draws an ``image/svg+xml`` output as ``<img src="data:...">`` -- an image, in which the
  page's CSS variables do not apply -- and only for trusted outputs (its SVG renderer is not
  "safe"). So the picture goes *inline* in the ``text/html`` output, where the ``--jp-*``
  variables of the theme reach it: :data:`THEME` colours are written ``var(--jp-..., light)``.
- An untrusted output (a notebook from someone else) is sanitized: ``<svg>`` and ``<style>`` are
  dropped but the text inside dropped tags is kept. Glyphs drawn as paths leave no text behind,
  and the picture kept in the SVG's ``<defs>`` (never drawn there; the PNG's pixels as lossless WebP)
  becomes a plain ``<img>``: the
  sanitized output still shows the picture, in light colours.
- nbconvert's HTML keeps the ``text/html`` as it is (its page has no ``--jp-*`` variables, so
  the fallbacks -- the light theme -- apply); GitHub and other readers that drop HTML fall
  back to ``image/png`` in the bundle, which carries a ``width`` in its metadata.

**Why sentinel colours.** The themed roles (text, muted text, background, storage rows, grid)
are drawn in colours one step from their light-theme values (``#000001`` for text): the PNG looks
the same, and in the SVG exactly those -- not the black of a label inside a yellow bar or the
black "shares bytes" outline -- become CSS variables.

>>> from tensorviz.render.mpl.figure import TensorvizFigure
>>> fig = TensorvizFigure(figsize=(2, 1)); _ = fig.text(0.1, 0.5, "w", color=TEXT)
>>> "var(--jp-ui-font-color0, #000000)" in inline_svg(fig, alt="w")
True
"""

from __future__ import annotations

import base64
import functools
import html
import io
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "TEXT",
    "MUTED",
    "BACKGROUND",
    "ROW",
    "GRID",
    "THEME",
    "DESIGN_PX",
    "MIN_LABEL_PX",
    "MAX_SCALE",
    "DESIGN_INCHES",
    "MIN_FONT_PT",
    "SVG_LIMIT",
    "inline_svg",
    "compact_svg",
    "hatches_of",
    "hatch_path_data",
    "fallback_image",
    "text_sizes",
    "min_width",
    "themed",
]

TEXT = "#000001"  # labels, ticks, axes
MUTED = "#555556"  # secondary words ("unreferenced 1.2 KiB", the tied-names key)
BACKGROUND = "#fffffe"  # the figure, and behind run labels and unreferenced bytes
ROW = "#e9e9ea"  # a storage's row
GRID = "#dddddc"  # byte grid lines

#: sentinel -> (JupyterLab variable, its light-theme value, the fallback outside Lab)
THEME: dict[str, tuple[str, str]] = {
    TEXT: ("--jp-ui-font-color0", "#000000"),
    MUTED: ("--jp-ui-font-color2", "#555555"),
    BACKGROUND: ("--jp-layout-color0", "#ffffff"),
    ROW: ("--jp-layout-color2", "#e9e9e9"),
    GRID: ("--jp-border-color2", "#dddddd"),
}

#: The narrowest output a static picture is laid out for, in CSS pixels: a 1024-px JupyterLab
#: window with the file browser open leaves about 590 px for an output.
DESIGN_PX = 590
#: The smallest text of a static picture, in CSS pixels, at :data:`DESIGN_PX` (and larger when
#: the output is wider): 9 px, the size below which labels stop being read comfortably.
MIN_LABEL_PX = 9
#: At most this many times :data:`DESIGN_PX` wide (in a 1400-px output: 885 px, text 1.5x).
MAX_SCALE = 1.5
#: The figure width of a static picture: 96 CSS px per inch, so the SVG is DESIGN_PX wide.
DESIGN_INCHES = DESIGN_PX / 96
#: The smallest font, in points, that gives MIN_LABEL_PX at DESIGN_PX (an SVG has 72 units per
#: inch and is shown 96 px per inch: a point is 4/3 px).
MIN_FONT_PT = MIN_LABEL_PX * 0.75
#: SVGs larger than this (tens of thousands of drawn rectangles) are replaced by the PNG.
SVG_LIMIT = 2_000_000

#: Gids of texts drawn on coloured bars: their ink is chosen for the bar, not the page.
ON_BARS = frozenset({"bar-label", "overview-marker"})

_IDS = iter(range(1 << 62))


def themed(fig: Figure) -> Figure:
    """Make texts and axes drawn in matplotlib's default colours use the :data:`TEXT` sentinel
    (the overview panel's, the legend's, the ticks'), so the theme reaches them; returns ``fig``.
    Texts given a colour of their own, and texts on bars (gids in :data:`ON_BARS`: black or
    white for the bar's fill, whatever the theme), keep it."""
    import matplotlib as mpl
    from matplotlib.colors import same_color
    from matplotlib.text import Text

    default = mpl.rcParams["text.color"]
    for text in fig.findobj(Text):
        if text.get_gid() not in ON_BARS and same_color(text.get_color(), default):
            text.set_color(TEXT)
    fig.patch.set_facecolor(BACKGROUND)
    for ax in fig.axes:
        if ax.patch.get_visible():
            ax.patch.set_facecolor(BACKGROUND)
        for spine in ax.spines.values():
            spine.set_edgecolor(TEXT)
        ax.tick_params(colors=TEXT, which="both")
    return fig


def text_sizes(svg: str) -> list[float]:
    """The font size (SVG units) of every text of a matplotlib SVG whose glyphs are paths:
    each text is drawn through ``scale(size / 100, -size / 100)``."""
    return [100 * float(k) for k in re.findall(r"scale\(([0-9.]+) -[0-9.]+\)", svg)]


def min_width(svg: str, width: float) -> float:
    """The narrowest an SVG ``width`` units wide may be shown, in CSS px, for its smallest text
    to stay :data:`MIN_LABEL_PX`: in a narrower output its box scrolls sideways instead."""
    sizes = text_sizes(svg)
    return MIN_LABEL_PX * width / min(sizes) if sizes else 0.0


#: matplotlib writes an SVG hatch as one 72-unit tile drawn at density 6 (backend_svg's
#: ``HATCH_SIZE``, ``get_hatch_path()``); a dot or circle hatch then holds hundreds of shapes.
_HATCH_TILE, _HATCH_DENSITY = 72, 6
#: The same lattice at density 2 in a 24-unit tile: a shape hatch with ``c`` marks repeats every
#: 12/c units across and 24/c down at either density (its rows are even in number, so the
#: y-flipped tile is the same lattice), and 24 divides 72, so the tiles line up too.
_SMALL_TILE, _SMALL_DENSITY = 24, 2
#: Hatch marks drawn as shapes on a lattice (matplotlib.hatch's Shapes): only these are re-tiled.
_SHAPE_MARKS = frozenset(".oO*")


def hatches_of(fig: Figure) -> set[str]:
    """The hatch of every hatched artist of ``fig`` (those matplotlib writes as SVG patterns)."""
    found = set()
    for artist in fig.findobj():
        get = getattr(artist, "get_hatch", None)
        hatch = get() if get is not None else None
        if hatch:
            found.add(hatch)
    return found


def hatch_path_data(hatch: str, *, density: int, size: int) -> str:
    """The path data matplotlib's SVG writer gives ``hatch`` in a ``size``-unit pattern tile
    (the same transform and number format as ``RendererSVG._write_hatches``)."""
    from matplotlib import _path  # the private module backend_svg formats its paths with
    from matplotlib.hatch import get_path
    from matplotlib.transforms import Affine2D

    flip = Affine2D().scale(size).scale(1.0, -1.0).translate(0, size)
    codes = [b"M", b"L", b"Q", b"C", b"z"]
    return _path.convert_to_string(  # type: ignore[attr-defined]  # C extension without stubs
        get_path(hatch, density), flip, None, False, None, 6, codes, False
    ).decode("ascii")


#: A hatch pattern as matplotlib's SVG writer writes it: the 72-unit tile, its fill, its path data.
_TILE = re.compile(
    r'(<pattern [^>]*?width=")72(" height=")72(">\s*<rect x="0" y="0" width=")73(" height=")73'
    r'(" fill="[^"]*"/>\s*<path d=")([^"]*)"'
)


@functools.lru_cache(maxsize=32)
def _repeat(hatch: str) -> tuple[str, str]:
    """A shape hatch's path data in matplotlib's 72-unit tile, and in its 24-unit repeat."""
    big = hatch_path_data(hatch, density=_HATCH_DENSITY, size=_HATCH_TILE)
    return big, hatch_path_data(hatch, density=_SMALL_DENSITY, size=_SMALL_TILE)


def _compact_path(data: str) -> str:
    """SVG path data without the spaces and line breaks matplotlib writes around commands."""
    return re.sub(r" ?([MLQCz]) ?", r"\1", " ".join(data.split()))


def compact_svg(svg: str, *, hatches: set[str] | frozenset[str] = frozenset()) -> str:
    """A matplotlib SVG drawn the same in fewer bytes: each dot/circle hatch of ``hatches`` as
    its 24-unit repeat instead of a 72-unit tile (the ``....`` of expanded views: 255 KB ->
    under 11 KB), path data without spaces around commands, no comments (a label's words, which
    the glyph paths already draw) and no whitespace between tags."""
    tiles = dict(_repeat(h) for h in hatches if set(h) <= _SHAPE_MARKS)  # 72-unit path data -> 24-unit
    if tiles:
        n, m = _SMALL_TILE, _SMALL_TILE + 1

        def retile(t: re.Match) -> str:
            small = tiles.get(t[6])
            return t[0] if small is None else f'{t[1]}{n}{t[2]}{n}{t[3]}{m}{t[4]}{m}{t[5]}{small}"'

        svg = _TILE.sub(retile, svg)
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    svg = re.sub(r'(\sd=")([^"]*)"', lambda p: p[1] + _compact_path(p[2]) + '"', svg)
    # a glyph placed along its text: translate(x 0) is what a <use>'s own x attribute does
    svg = re.sub(r'(<use xlink:href="#[^"]+") transform="translate\(([-0-9.e]+) 0\)"', r'\1 x="\2"', svg)
    return re.sub(r">\s+<", "><", svg)


def fallback_image(png: bytes) -> tuple[str, bytes]:
    """The sanitizer's copy of a picture, as small as it can be without changing a pixel: the
    PNG re-encoded as lossless WebP (about 40 % of its bytes for these pictures; every browser
    since 2020 draws it) where Pillow has a WebP encoder, else the PNG itself. Returns the mime
    type and the bytes. (A palette PNG would change pixels: antialiased text gives these
    pictures hundreds to thousands of colours.)"""
    from PIL import Image, features

    if not features.check("webp"):
        return "image/png", png
    buf = io.BytesIO()
    with Image.open(io.BytesIO(png)) as image:
        image.save(buf, format="webp", lossless=True, quality=50, method=4)
    return ("image/webp", buf.getvalue()) if buf.tell() < len(png) else ("image/png", png)


def inline_svg(fig: Figure, *, alt: str, fallback_png: bytes | None = None) -> str:
    """``fig`` as an inline ``<svg>`` for an HTML output: scaled to the output's width (at most
    :data:`MAX_SCALE` times its own), the :data:`THEME` colours as ``--jp-*`` variables, glyphs
    as paths, ``alt`` as its accessible name, and ``fallback_png`` (if given) kept in its
    ``<defs>`` as an ``<img>`` that a sanitizer dropping SVG leaves visible (the same pixels in
    fewer bytes: :func:`fallback_image`)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path"}):  # glyphs as paths whatever the user's rcParams say
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    svg = compact_svg(svg, hatches=hatches_of(fig))
    for sentinel, (var, light) in THEME.items():
        svg = svg.replace(sentinel, f"var({var}, {light})")
    w_pt = float(re.search(r'<svg[^>]*\swidth="([0-9.]+)pt"', svg).group(1))  # type: ignore[union-attr]  # matplotlib always writes it
    natural = w_pt * 4 / 3  # CSS px
    uid = f"tvsvg{next(_IDS)}"
    style = f"width:100%;min-width:{min_width(svg, w_pt):.0f}px;max-width:{MAX_SCALE * natural:.0f}px;height:auto;display:block"
    svg = re.sub(
        r'<svg([^>]*?)\swidth="[0-9.]+pt"\s+height="[0-9.]+pt"',
        rf'<svg\1 class="tensorviz-svg {uid}" role="img" aria-label="{html.escape(alt)}" style="{style}"',
        svg,
        count=1,
    )
    if fallback_png is not None:
        mime, data = fallback_image(fallback_png)
        src = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        img = (
            f'<foreignObject width="0" height="0"><img src="{src}" alt="{html.escape(alt)}" '
            f'style="max-width:100%;width:{natural:.0f}px"/></foreignObject>'
        )
        svg = (
            svg.replace("<defs>", "<defs>" + img, 1)
            if "<defs>" in svg
            else svg.replace(">", "><defs>" + img + "</defs>", 1)
        )
    return svg
