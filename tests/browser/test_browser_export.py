"""tv.export_html's page in headless Chromium, opened from ``file://`` with every request that is
not the file itself (or one of its own ``blob:`` modules) refused: hover, click, zoom, grouping,
scroll, overview and model map work with no kernel and no network, and hostile names stay text.

The model is the one the JupyterLab canvas test drives (``lab_notebooks.TINY``), so the tooltip
must read exactly as it does there. Screenshots go to ``test-artifacts/browser/export_*.png``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tensorviz as tv
from tests.helpers.lab_notebooks import TINY
from tests.helpers.labserver import SHOTS, watched_page

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _tiny_lm() -> torch.nn.Module:
    ns: dict = {}
    exec(TINY.split("ex = tv.explore")[0], ns)  # the notebook's own model, built here
    return ns["model"]


@pytest.fixture
def page(browser, request):
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg = watched_page(browser, 1200, 900, 30_000)
    pg.refused = []

    def route(r):
        if r.request.url.startswith(("file:", "blob:", "data:")):
            r.continue_()
        else:
            pg.refused.append(r.request.url)
            r.abort()

    pg.route("**/*", route)
    pg.on("request", lambda req: req.url.startswith(("file:", "blob:", "data:")) or pg.refused.append(req.url))
    yield pg
    pg.screenshot(path=str(SHOTS / f"export_final_{request.node.name}.png"), full_page=True)
    pg.close()


def _open(page, path: Path):
    from playwright.sync_api import expect

    page.goto(path.as_uri())
    cv = page.locator(".tvz-cv")
    expect(cv.locator(".tvz-cv-scroll canvas")).to_be_visible()
    return cv


def _locate(cv, name: str) -> dict:
    where = cv.evaluate("(el, name) => el.tvz.locate(name)", name)
    assert where is not None, f"{name} is not drawn"
    return where


def test_exported_page_hovers_selects_zooms_and_regroups_offline(page, tmp_path):
    from playwright.sync_api import expect

    cv = _open(page, tv.export_html(_tiny_lm(), tmp_path / "tiny.html"))
    expect(cv.locator(".tvz-cv-caption")).to_have_text(
        "6 of 12 tensors shown (+ 6 simple storages, 512 B, folded into one row)"
    )
    tip = cv.locator(".tvz-tip")
    # hover: the exact name and bytes, as in JupyterLab
    q = _locate(cv, "q.weight")
    page.mouse.move(q["x"], q["y"])
    expect(tip).to_contain_text("q.weight")
    expect(tip).to_contain_text("float32[16, 16] · stride (16, 1) · offset 0")
    expect(tip).to_contain_text("bytes [0 B, 1 KiB) · 1 KiB · storage #1")
    page.screenshot(path=str(SHOTS / "export_hover.png"))
    # click selects; the page's precomputed relations outline what shares its bytes
    page.mouse.click(q["x"], q["y"])
    assert cv.evaluate("el => el.parentElement.tvzModel.get('selected')") == ["q.weight"]
    qkv = _locate(cv, "qkv.weight")
    page.mouse.move(qkv["x"], qkv["y"])
    expect(tip).to_contain_text("contains q.weight (selected)")
    # drag from 25% to 75% of the plot: the visible byte range is the middle half
    plot = cv.evaluate("el => el.tvz.plot()")
    y = plot["top"] + 10
    page.mouse.move(plot["left"] + plot["width"] * 0.25, y)
    page.mouse.down()
    page.mouse.move(plot["left"] + plot["width"] * 0.75, y, steps=5)
    page.mouse.up()
    expect(cv.locator(".tvz-cv-foot")).to_contain_text("zoomed: double-click to reset")
    zoomed, span = cv.evaluate("el => el.tvz.plot()"), plot["hi"] - plot["lo"]
    assert abs(zoomed["lo"] - span * 0.25) <= span * 0.01 and abs(zoomed["hi"] - span * 0.75) <= span * 0.01
    page.screenshot(path=str(SHOTS / "export_zoomed.png"))
    page.mouse.dblclick(plot["left"] + 5, plot["top"] + 5)
    expect(cv.locator(".tvz-cv-foot")).to_contain_text("bytes [0 B, 4 KiB) · drag across the bars to zoom")
    # another grouping, one click away: the tied pair is one bar
    page.get_by_role("button", name="exact span", exact=True).click()
    wte = _locate(cv, "wte.weight")
    page.mouse.move(wte["x"], wte["y"])
    expect(tip).to_contain_text("wte.weight ≡ lm_head.weight")
    # the model map: the static module tree, opened with no script
    tree = page.locator(".tvz-page-map .tvt")
    expect(tree).to_contain_text("qkv")
    assert not page.errors, page.errors
    assert page.refused == []


def test_exported_page_scrolls_and_has_the_overview(page, tmp_path):
    from playwright.sync_api import expect

    # 60 storages (over the 40-lane budget), every other one shared by a slice (so the overview tells
    # them apart), drawn largest first: storage #1, the smallest shared one, is near the last lane
    obj = {}
    for i in range(60):
        obj[f"layer{i:02d}.w"] = t = torch.zeros(16 + i)
        if i % 2:
            obj[f"layer{i:02d}.half"] = t[:8]
    cv = _open(page, tv.export_html(obj, tmp_path / "many.html"))
    ov = page.locator(".tvz-ov")
    expect(ov.locator(".tvz-ov-title")).to_contain_text("every storage, in order: 60 storages")
    ov.scroll_into_view_if_needed()
    cell = ov.evaluate("el => el.tvz.cell(1)")
    page.mouse.move(cell["x"], cell["y"])
    expect(cv.locator(".tvz-tip")).to_contain_text("layer01.w")
    page.mouse.click(cell["x"], cell["y"])
    expect(cv).to_have_attribute("data-focus-lane", str(cell["lane"]))
    page.wait_for_function(
        "([el, lane]) => +el.dataset.firstLane > 0 && +el.dataset.firstLane <= lane && lane < +el.dataset.lastLane",
        arg=[cv.element_handle(), cell["lane"]],
    )  # the lanes scrolled down to it
    last = _locate(cv, "layer01.w")
    page.mouse.move(last["x"], last["y"])
    expect(cv.locator(".tvz-tip")).to_contain_text("bytes [0 B, 68 B) · 68 B")
    page.screenshot(path=str(SHOTS / "export_overview.png"), full_page=True)
    assert not page.errors, page.errors
    assert page.refused == []


def test_hostile_names_are_text_in_the_exported_page(page, tmp_path):
    from playwright.sync_api import expect

    evil = "</script><img src=x onerror=\"document.title='pwned'\">"
    w = torch.zeros(32)
    cv = _open(page, tv.export_html({"m." + evil: w[:8], "m.ok": w}, tmp_path / "evil.html", title=evil))
    assert page.evaluate("() => document.images.length") == 0 and page.title() == evil
    where = _locate(cv, "m." + evil)
    page.mouse.move(where["x"], where["y"])
    expect(cv.locator(".tvz-tip")).to_contain_text("m." + evil)
    expect(page.locator(".tvz-page-head")).to_have_text(evil)
    assert not page.errors, page.errors
    assert page.refused == []
