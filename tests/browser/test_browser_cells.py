"""A bar drawn per cell says so in the browser: hover and legend ("per 8 KiB cell"), as the static
picture's legend does. The page is ``tv.export_html``'s (the same canvas.js as in JupyterLab),
opened from ``file://`` in headless Chromium; the payload itself: tests/explorer/test_canvas.py."""

from __future__ import annotations

import pytest
import torch

import tensorviz as tv
from tests.helpers.labserver import SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_hover_and_legend_say_per_cell(page, tmp_path) -> None:
    from playwright.sync_api import expect

    n = 1 << 24  # 4 rows of 16 MiB on meta: a's and b's footprints have 2**24 runs, drawn per 8 KiB cell
    x = torch.empty(4, n, dtype=torch.uint8, device="meta")
    path = tv.export_html({"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2], "row": x[3]}, tmp_path / "cells.html")
    page.goto(path.as_uri())
    cv = page.locator(".tvz-cv")
    expect(cv.locator(".tvz-cv-scroll canvas")).to_be_visible()
    expect(cv).to_contain_text("span with gaps (solid: bytes read, per 8 KiB cell)")
    tip = cv.locator(".tvz-tip")
    for name, per_cell in (("a", True), ("row", False)):
        where = cv.evaluate("(el, name) => el.tvz.locate(name)", name)
        page.mouse.move(where["x"], where["y"])
        expect(tip).to_contain_text(name)
        said = "bytes read drawn per 8 KiB cell: a cell is solid when it holds one (the % is exact)"
        if per_cell:
            expect(tip).to_contain_text(said)
            expect(tip).to_contain_text("footprint 28.57% of its span (strided, with gaps)")  # 16 MiB read of 56
            page.screenshot(path=str(SHOTS / "cells_hover.png"))
        else:
            expect(tip).not_to_contain_text("per 8 KiB cell")
