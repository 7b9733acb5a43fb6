"""Issue 25, item 2 (static side): static pictures sized for the output and reading the theme.

``tv.show`` lays its picture out for a 590-px output (JupyterLab at 1024 px with the file
browser open) and puts it in the HTML as an inline SVG that scales with the output: no text
under 9 CSS px at 590 px. Its themed colours are JupyterLab's ``--jp-*`` variables; a sanitizer
that drops the SVG leaves the PNG. Screenshots in light and dark: tests/browser/test_browser_pictures.py.
"""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import pytest
import torch

import tensorviz as tv
from tensorviz.plan.colors import PALETTE
from tensorviz.render.theme import DESIGN_PX, MAX_SCALE, MIN_FONT_PT, MIN_LABEL_PX, THEME

T5_TIED = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")


def seed() -> dict[str, torch.Tensor]:
    x = torch.rand(8, 10, 50)
    return {"a": x, "b": x[2:4], "c": x[:, ::2], "f": x[0].t()}


def tied() -> dict[str, torch.Tensor]:
    w = torch.zeros(96, 16)
    names = [f"encoder.block.{i}.layer.0.SelfAttention.{p}.weight" for i in range(3) for p in "qkvo"]
    return dict.fromkeys(T5_TIED, w) | {n: torch.zeros(16, 16) for n in names}


def viewbox_width(svg: str) -> float:
    return float(re.search(r'viewBox="0 0 ([0-9.]+) [0-9.]+"', svg).group(1))


def text_sizes(svg: str) -> list[float]:
    """Font sizes (SVG units) of every text: glyphs as paths are scaled by size / 100."""
    return [100 * float(s) for s in re.findall(r"scale\(([0-9.]+) -[0-9.]+\)", svg)]


@pytest.mark.parametrize("make", [seed, tied], ids=["seed", "tied"])
@pytest.mark.parametrize("by", ["storage", "span"])
def test_no_text_under_9_css_px_at_590_px(make, by) -> None:
    shown = tv.show(make(), by=by)
    svg = shown.svg
    sizes = text_sizes(svg)
    assert len(sizes) >= 8  # the header, lane labels, ticks, axis label, ...
    width = viewbox_width(svg)
    assert width == pytest.approx(DESIGN_PX * 0.75, abs=0.5)  # 72 units per inch, 96 px per inch
    smallest_px = min(sizes) * DESIGN_PX / width
    assert smallest_px >= MIN_LABEL_PX, (smallest_px, sorted(sizes)[:3])
    style = re.search(r'<svg[^>]*style="([^"]+)"', svg).group(1)
    assert "width:100%" in style and f"max-width:{MAX_SCALE * DESIGN_PX:.0f}px" in style
    # the PNG of the bundle: DESIGN_PX / 96 inches at 100 dpi, every text >= MIN_FONT_PT
    from PIL import Image

    assert Image.open(io.BytesIO(shown.png)).size[0] == int(DESIGN_PX / 96 * 100)  # 614: matplotlib truncates


def test_every_drawn_text_is_at_least_the_minimum_font() -> None:
    from matplotlib.text import Text

    from tensorviz.render.mpl import render
    from tensorviz.render.theme import DESIGN_INCHES

    fig = render(tv.diagram(tied(), by="span", expand_simple=True), width=DESIGN_INCHES)
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert min(sizes) >= MIN_FONT_PT


def test_themed_colours_are_jupyterlab_variables() -> None:
    svg = tv.show(seed()).svg
    for sentinel in THEME:
        assert sentinel not in svg
    for var in ("--jp-ui-font-color0", "--jp-layout-color0", "--jp-layout-color2", "--jp-border-color2"):
        assert f"var({var}, " in svg
    # bar fills keep their palette colours, whatever the theme
    fills = set(re.findall(r"fill: (#[0-9a-f]{6})", svg))
    assert {"#4477aa", "#ee7733", "#99ddff"} <= fills & set(PALETTE)


class _Sanitizer(HTMLParser):
    """Like JupyterLab's sanitizer for an untrusted output (sanitize-html, "discard" mode):
    tags outside its allowed list (svg and all SVG tags, style) are dropped and the text inside
    them kept, except inside style."""

    ALLOWED = {"div", "img", "details", "summary", "table", "thead", "tbody", "tr", "th", "td", "p", "span"}

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[str] = []
        self.text: list[str] = []
        self.in_style = 0

    def handle_starttag(self, tag, attrs):
        self.in_style += tag == "style"
        if tag in self.ALLOWED:
            self.kept.append(tag)

    def handle_endtag(self, tag):
        self.in_style -= tag == "style"

    def handle_data(self, data):
        if not self.in_style:
            self.text.append(data)


def test_a_sanitized_output_shows_the_png_and_no_stray_text() -> None:
    shown = tv.show(tied(), by="span")
    svg = shown.svg
    s = _Sanitizer()
    s.feed(svg)
    assert s.kept == ["img"]  # the PNG fallback, as an <img>
    assert "".join(s.text).strip() == ""  # glyphs are paths: no label text is left behind
    assert 'src="data:image/webp;base64,' in svg and "aria-label=" in svg
    # in a trusted output the <img> is inside <defs>: never drawn
    assert re.search(r"<defs><foreignObject[^>]*><img ", svg)


def test_a_users_svg_fonttype_neither_leaks_text_nor_is_changed() -> None:
    """``svg.fonttype = "none"`` in the user's rcParams would write labels as <text> a sanitizer
    leaves behind; the picture keeps its glyphs as paths and the user's setting is left as it was."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        svg = tv.show(tied(), by="span").svg
        assert matplotlib.rcParams["svg.fonttype"] == "none"
    s = _Sanitizer()
    s.feed(svg)
    assert "<text" not in svg and "".join(s.text).strip() == ""
    assert text_sizes(svg)  # every label still drawn, as scaled glyph paths


def test_alt_text_lists_every_tied_name() -> None:
    svg = tv.show(tied(), by="span").svg
    label = re.search(r'aria-label="([^"]+)"', svg).group(1)
    assert "tied: " + " ≡ ".join(T5_TIED) in label


def test_hostile_names_are_escaped_in_the_svg() -> None:
    shown = tv.show({"<b>x</b>\x1b[2J": torch.zeros(2), '"q"': torch.zeros(3)})
    html = shown.to_html()
    assert "<b>x</b>" not in html and "\x1b" not in html


def test_an_svg_past_the_limit_falls_back_to_the_png(monkeypatch) -> None:
    import tensorviz.render.theme as theme

    monkeypatch.setattr(theme, "SVG_LIMIT", 1000)
    shown = tv.show(seed())
    assert shown.svg == "" and "<svg" not in shown.to_html() and 'src="data:image/png;base64,' in shown.to_html()


def test_html_box_scrolls_instead_of_clipping() -> None:
    html = tv.show({"x" * 300: torch.zeros(2)}).to_html()
    assert re.match(r'<div class="tensorviz-show" style="[^"]*overflow-x:auto', html)


@pytest.mark.parametrize("which", ["explain", "explain_view"])
def test_explain_pictures_never_show_text_under_9_px(which) -> None:
    """The teaching pictures are drawn wider than 590 px: their SVG scales with the output but
    keeps a min-width at which its smallest text is 9 CSS px; a narrower box scrolls sideways."""
    from tensorviz.render.theme import text_sizes

    x = torch.arange(24.0).reshape(4, 6)
    if which == "explain":
        html = tv.explain(x, x.t(), x[:, ::2])._repr_html_()
    else:
        html = tv.explain_view(x.t(), (24,))._repr_mimebundle_()["text/html"]
    svg = html[html.index("<svg") :]
    min_px = float(re.search(r"min-width:([0-9.]+)px", svg).group(1))
    assert min(text_sizes(svg)) * min_px / viewbox_width(svg) >= MIN_LABEL_PX - 0.05
    assert min_px <= 1024  # readable without scrolling in a 1024-px output
    assert re.search(r'<div class="tensorviz-figure" style="[^"]*overflow-x:auto', html)


def test_module_tree_wraps_inside_its_box() -> None:
    from tensorviz.render.html.tree import TREE_CSS

    assert "overflow-x:auto" in TREE_CSS.split("}")[0]  # the .tvt box scrolls, never clips
    assert "overflow-wrap:anywhere" in TREE_CSS and "minmax(12em,1fr)" in TREE_CSS
    assert "white-space:nowrap" not in TREE_CSS.replace(".tvt .tvt-num{white-space:nowrap;}", "")


def test_the_diff_picture_fits_the_output_too() -> None:
    from tensorviz.render.theme import text_sizes

    a = {"w": torch.zeros(4, 4), "b": torch.zeros(4)}
    b = {"w": torch.zeros(4, 8), "c": torch.zeros(4)}
    html = tv.show(tv.diff(a, b)).to_html()
    svg = html[html.index("<svg") : html.index("</svg>")]
    min_px = float(re.search(r"min-width:([0-9.]+)px", svg).group(1))
    assert min(text_sizes(svg)) * min_px / viewbox_width(svg) >= MIN_LABEL_PX - 0.05
    assert 'aria-label="tensorviz diff: ' in svg
