"""The bytes of a static picture's outputs (the notebooks' size, ``tests/project/test_notebooks.py``).

A ``tv.show`` output carries its picture on every route: ``image/png`` (frontends and readers
without HTML), ``text/html`` with the inline SVG (JupyterLab, VS Code, nbconvert) and, inside the
SVG, the picture as an ``<img>`` that a sanitizer dropping the SVG leaves (an untrusted output),
plus ``text/plain``. What changed is their bytes, never a pixel or a route:
- the SVG (``tensorviz.render.theme.compact_svg``): a dot hatch written as its 24-unit repeat
  instead of a 72-unit tile of 613 circles, path data without matplotlib's spaces and line
  breaks, glyphs placed by ``x``, no comments;
- the sanitizer's ``<img>`` (``fallback_image``): the PNG's pixels as lossless WebP, about 40 %
  of the PNG's bytes. A palette PNG would not be lossless for these pictures (antialiased
  glyphs give 359-1,569 colours in notebook 01's), which the last test checks.
The same pixels in Chromium, SVG and sanitized: tests/browser/test_browser_svg_compact.py.
"""

from __future__ import annotations

import base64
import io
import re

import torch

import tensorviz as tv
from tensorviz.render.theme import compact_svg, fallback_image, hatch_path_data
from tests.helpers.pictures import embedded_images, expanded, pixels, raw_svg, same_pixels

NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def centres(data: str) -> set[tuple[float, float]]:
    """The centre of each closed shape (``M ... z``) of hatch path data, to 1e-3 units."""
    out = set()
    for shape in re.findall(r"M[^M]*", data):
        xy = [float(n) for n in NUMBER.findall(shape)]
        xs, ys = xy[0::2], xy[1::2]
        out.add((round((min(xs) + max(xs)) / 2, 3), round((min(ys) + max(ys)) / 2, 3)))
    return out


def test_every_route_keeps_its_output() -> None:
    shown = tv.show(expanded())
    bundle = shown._repr_mimebundle_()
    assert sorted(bundle) == ["image/png", "text/html", "text/plain"]
    html = bundle["text/html"]
    assert html.count("<svg") == 1 and 'role="img"' in html
    # the sanitizer's <img> holds the bundle's PNG's pixels, and that is the PNG drawn
    [(mime, copy)] = embedded_images(html)
    assert mime == "image/webp" and same_pixels(copy, shown.png)
    assert base64.b64decode(bundle["image/png"]) == shown.png
    assert bundle["text/plain"] == shown.text


def test_dot_hatch_is_written_as_its_repeat() -> None:
    svg = tv.show(expanded()).svg
    tiles = re.findall(r'<pattern [^>]*width="([0-9]+)" height="([0-9]+)">(.*?)</pattern>', svg)
    dots = [d for w, h, body in tiles for d in re.findall(r'<path d="([^"]*)"', body) if "C" in d]
    assert len(dots) == 1 and dots[0] == " ".join(dots[0].split())
    assert [(w, h) for w, h, body in tiles if "C" in body] == [("24", "24")]
    lines = [(w, h) for w, h, body in tiles if "C" not in body]
    assert lines and set(lines) == {("72", "72")}  # line hatches stay as matplotlib tiles them


def test_the_repeat_tiles_the_same_lattice() -> None:
    """The 24-unit tile, repeated 3 x 3, puts each mark exactly where matplotlib's 72-unit tile
    has one (shapes on tile edges included), for every shape hatch the pictures could use."""
    for hatch in ("....", ".", "o", "O", "*", ".o", "oo"):
        big = centres(hatch_path_data(hatch, density=6, size=72))
        small = centres(hatch_path_data(hatch, density=2, size=24))
        tiled = {(round(x + dx, 3), round(y + dy, 3)) for x, y in small for dx in (0, 24, 48) for dy in (0, 24, 48)}
        assert tiled == big, hatch
    assert len(centres(hatch_path_data("....", density=6, size=72))) == 613


def test_compaction_keeps_every_coordinate_and_tag() -> None:
    raw, hatches = raw_svg(expanded())
    small = compact_svg(raw)  # no hatch re-tiled: everything else must be the same drawing
    paths = re.compile(r'\sd="([^"]*)"')
    assert [NUMBER.findall(d) for d in paths.findall(small)] == [NUMBER.findall(d) for d in paths.findall(raw)]
    assert [re.sub(r"\s", "", d) for d in paths.findall(small)] == [re.sub(r"\s", "", d) for d in paths.findall(raw)]
    assert re.findall(r"<(/?[\w:]+)", small) == re.findall(r"<(/?[\w:]+)", raw)
    assert "<!--" in raw and "<!--" not in small and not re.search(r">\s+<", small)
    assert len(compact_svg(raw, hatches=hatches)) < 0.3 * len(raw)  # the dot hatch was 85 % of it


def test_a_palette_png_would_not_be_lossless() -> None:
    """Why the PNGs stay RGB: more than 256 colours (antialiased glyphs and hatches), so an
    8-bit palette would change pixels."""
    from PIL import Image

    image = Image.open(io.BytesIO(tv.show(expanded()).png))
    assert image.mode == "RGB" and len(image.getcolors(1 << 24)) > 256


def test_the_fallback_is_the_same_pixels_in_fewer_bytes() -> None:
    for obj in (expanded(), {"x": torch.zeros(3, 4), "x[1]": torch.zeros(3, 4)[1]}):
        png = tv.show(obj).png
        mime, copy = fallback_image(png)
        assert mime == "image/webp" and copy[8:12] == b"WEBP"
        assert pixels(copy) == pixels(png) and len(copy) < 0.6 * len(png)
