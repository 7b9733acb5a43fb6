"""The smaller static picture draws the same pixels in a real browser (Chromium).

``tensorviz.render.theme.compact_svg`` rewrites matplotlib's SVG (a dot hatch as its 24-unit
repeat, compact path data, glyphs placed by ``x``); ``fallback_image`` re-encodes the sanitizer's
PNG as lossless WebP. Here the raw and the compact SVG of pictures with every hatch are drawn side
by side at 2x, and the WebP and the PNG are decoded by the browser itself.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.render.theme import compact_svg, fallback_image
from tests.helpers.pictures import expanded, raw_svg

pytestmark = pytest.mark.browser


def cases() -> dict[str, dict[str, torch.Tensor]]:
    base = torch.arange(10.0)
    return {
        "expanded": expanded(),
        "overlapping": {"a": base, "windows": base.as_strided((4, 4), (2, 1)), "bits": base.view(torch.int32)},
        "rows": {"x": torch.zeros(3, 4), "x[1]": torch.zeros(3, 4)[1]},
    }


def screenshot(page, svg: str) -> np.ndarray:
    from PIL import Image

    page.set_content(f"<html><body style='margin:0'>{svg}</body></html>")
    return np.asarray(Image.open(io.BytesIO(page.locator("svg").first.screenshot())).convert("RGB")).astype(int)


@pytest.mark.parametrize("name", sorted(cases()))
def test_compact_svg_draws_the_same_pixels(browser, name) -> None:
    page = browser.new_page(device_scale_factor=2, viewport={"width": 1000, "height": 800})
    raw, hatches = raw_svg(cases()[name])
    raw = raw[raw.index("<svg") :]
    before, after = screenshot(page, raw), screenshot(page, compact_svg(raw, hatches=hatches))
    page.close()
    assert before.shape == after.shape
    differ = np.abs(before - after).max(axis=2)
    # antialiasing where the small hatch tiles meet: measured 0-36 of ~490,000 pixels, by <= 3/255
    assert int((differ > 0).sum()) <= 0.0002 * differ.size and int(differ.max()) <= 4


def test_the_browser_decodes_the_webp_fallback_to_the_pngs_pixels(page) -> None:
    png = tv.show(expanded()).png
    mime, copy = fallback_image(png)
    assert mime == "image/webp"
    urls = [f"data:{m};base64,{base64.b64encode(b).decode()}" for m, b in (("image/png", png), (mime, copy))]
    same = page.evaluate(
        """async (urls) => {
            const data = [];
            for (const url of urls) {
                const img = new Image(); img.src = url; await img.decode();
                const c = document.createElement("canvas"); c.width = img.naturalWidth; c.height = img.naturalHeight;
                const g = c.getContext("2d"); g.drawImage(img, 0, 0);
                data.push([c.width, c.height, Array.from(g.getImageData(0, 0, c.width, c.height).data)]);
            }
            const [a, b] = data;
            return a[0] === b[0] && a[1] === b[1] && a[2].length === b[2].length && a[2].every((v, i) => v === b[2][i]);
        }""",
        urls,
    )
    assert same
