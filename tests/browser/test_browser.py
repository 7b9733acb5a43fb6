"""The explorer in a real JupyterLab, driven through headless Chromium by Python Playwright.

Starts ``jupyter lab`` from this virtual environment (see ``labserver.py``), opens notebooks
written into a temporary folder that call ``tv.explore(...)``, runs them from the Run menu and
uses the diagram canvas as a person would: hover a bar's pixel, click, shift-click, drag to zoom,
double-click, toggle the grouping, scroll to the last of 100,001 lanes; then checks what the
kernel sees (``ex.selected``, ``canvas.zoom``) and the saved notebook's static pictures.
Screenshots go to ``test-artifacts/browser/`` (the gallery's explorer pictures come from here).

Needs Debian's ``chromium`` (``make browser-deps``) and the ``playwright`` Python package; without
either, the test is skipped with the reason, never passed.
"""

from __future__ import annotations

import pytest

from tensorviz.explorer.static import src_mark
from tests.helpers.lab_notebooks import BIG, LLAMA, TINY
from tests.helpers.labserver import (
    SHOTS,
    chromium,
    lab_server,
    open_notebook,
    run_all,
    run_cell,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server from this virtual env serving the test notebooks."""
    chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed in this environment")
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(root, "explore.ipynb", [TINY])
    write_notebook(
        root,
        "canvas.ipynb",
        [
            TINY,
            "print('SEL', ex.selected, 'ZOOM', [round(z) for z in ex.canvas.zoom])",
            'ex.selected = ["wte.weight"]',
            "ex.canvas.zoom = [1024.0, 2048.0]",
        ],
    )
    write_notebook(root, "big.ipynb", [BIG])
    write_notebook(root, "llama.ipynb", [LLAMA])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _explorer(page, nth: int = 0, timeout: float = 60_000):
    """The nth explorer on the page, once its canvas has drawn."""
    from playwright.sync_api import expect

    ex = page.locator(".jp-OutputArea-output .tvz-explorer").nth(nth)
    expect(ex.locator(".tvz-cv-scroll canvas")).to_be_visible(timeout=timeout)
    notebook = page.locator(".jp-Notebook")
    expect(notebook).not_to_contain_text("Loading widget")
    expect(notebook).not_to_contain_text("Error displaying widget")
    return ex


def _locate(ex, name: str) -> dict:
    """Where the canvas draws ``name`` (client pixels), scrolling its lane into view."""
    where = ex.locator(".tvz-cv").evaluate("(el, name) => el.tvz.locate(name)", name)
    assert where is not None, f"{name} is not drawn"
    return where


def _pixel(ex, x: float, y: float) -> list[int]:
    return ex.locator(".tvz-cv").evaluate("(el, p) => el.tvz.pixel(p[0], p[1])", [x, y])


def _rgb(color: str) -> list[int]:
    return [int(color[i : i + 2], 16) for i in (1, 3, 5)]


def test_canvas_hover_click_select_zoom_and_grouping(lab, page):
    from playwright.sync_api import expect

    open_notebook(page, lab, "canvas.ipynb")
    run_cell(page, 1)  # the explorer only: the later cells are run one by one below
    ex = _explorer(page)
    ex_id = ex.evaluate("e => [...e.classList].find(c => c.startsWith('tvz-live-')).slice(9)")
    page.wait_for_selector(".jp-StatusBar-Widget:has-text('Idle')")
    expect(ex.locator(".tvz-cv-caption")).to_have_text(
        "6 of 12 tensors shown (+ 6 simple storages, 512 B, folded into one row)"
    )
    ex.scroll_into_view_if_needed()
    tip = ex.locator(".tvz-tip")
    # the stand-in picture of this explorer is on the page, its whole output collapsed while live
    stand_in = page.locator(f".jp-OutputArea-child:has(img[src*='{src_mark('tvz-live-' + ex_id)}'])")
    expect(stand_in).to_have_count(1)
    assert stand_in.evaluate("e => getComputedStyle(e).display") == "none"

    # 1. Hover the pixel at the middle of q.weight's bar: its colour is the bar's, the tooltip names it.
    q = _locate(ex, "q.weight")
    assert _pixel(ex, q["x"], q["y"])[:3] == _rgb(q["color"])
    page.mouse.move(q["x"], q["y"])
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("q.weight")
    expect(tip).to_contain_text("float32[16, 16] · stride (16, 1) · offset 0")
    expect(tip).to_contain_text("bytes [0 B, 1 KiB) · 1 KiB · storage #1")
    ex.screenshot(path=str(SHOTS / "canvas_hover.png"))

    # 2. Click: selected in Python, in the list and in the details pane; relations in the tooltip.
    page.mouse.click(q["x"], q["y"])
    expect(ex.locator(".tvz-details")).to_contain_text("within qkv.weight")
    expect(ex.locator("select[multiple] option:checked")).to_have_text(["q.weight"])
    qkv = _locate(ex, "qkv.weight")
    page.mouse.move(qkv["x"], qkv["y"])
    expect(tip).to_contain_text("contains q.weight (selected)")
    k = _locate(ex, "k.weight")
    page.keyboard.down("Shift")
    page.mouse.click(k["x"], k["y"])
    page.keyboard.up("Shift")
    expect(ex.locator("select[multiple] option:checked")).to_have_text(["q.weight", "k.weight"])
    expect(run_cell(page, 2)).to_contain_text("SEL ['q.weight', 'k.weight'] ZOOM []")

    # 3. ex.selected from Python: wte.weight outlined in black, unrelated bars dimmed.
    ln = _locate(ex, "qkv.weight")  # contains q and k: drawn full; unrelated to wte: dimmed
    before = _pixel(ex, ln["x"], ln["y"])
    run_cell(page, 3)
    expect(ex.locator("select[multiple] option:checked")).to_have_text(["wte.weight"])
    expect(ex.locator(".tvz-details")).to_contain_text("wte.weight")
    wte = _locate(ex, "wte.weight")
    page.mouse.move(10, 10)
    page.wait_for_function(
        "([el, x, y]) => el.tvz.pixel(x, y).slice(0, 3).join() === '0,0,0'",
        arg=[ex.locator(".tvz-cv").element_handle(), wte["x0"] + 1, wte["y"]],
    )
    ln = _locate(ex, "qkv.weight")  # the page scrolled when the cell ran
    after = _pixel(ex, ln["x"], ln["y"])
    # dimmed: drawn at 30% opacity over the canvas's (theme) background, white in the light theme
    dimmed = [round(0.3 * c + 0.7 * 255) for c in before[:3]]
    assert before[3] == after[3] == 255 and all(abs(a - b) <= 2 for a, b in zip(after[:3], dimmed)), (before, after)
    ex.screenshot(path=str(SHOTS / "canvas_selected_from_python.png"))

    # 4. Drag from 25% to 75% of the plot: zoomed to the middle half, in the browser and in Python.
    ex.locator(".tvz-cv-scroll").scroll_into_view_if_needed()
    plot = ex.locator(".tvz-cv").evaluate("el => el.tvz.plot()")
    y = plot["top"] + 10
    page.mouse.move(plot["left"] + plot["width"] * 0.25, y)
    page.mouse.down()
    page.mouse.move(plot["left"] + plot["width"] * 0.75, y, steps=5)
    page.mouse.up()
    foot = ex.locator(".tvz-cv-foot")
    expect(foot).to_contain_text("zoomed: double-click to reset")
    zoomed = ex.locator(".tvz-cv").evaluate("el => el.tvz.plot()")
    span = plot["hi"] - plot["lo"]
    assert abs(zoomed["lo"] - span * 0.25) <= span * 0.01 and abs(zoomed["hi"] - span * 0.75) <= span * 0.01
    out = run_cell(page, 2)
    expect(out).to_contain_text(f"ZOOM [{round(zoomed['lo'])}, {round(zoomed['hi'])}]")
    ex.screenshot(path=str(SHOTS / "canvas_zoomed.png"))
    page.mouse.dblclick(plot["left"] + 5, plot["top"] + 5)
    expect(foot).to_contain_text("drag across the bars to zoom")
    run_cell(page, 4)  # a zoom set from Python
    expect(foot).to_contain_text("bytes [1 KiB, 2 KiB) zoomed")
    ex.locator(".tvz-cv-scroll").scroll_into_view_if_needed()  # running the cell scrolled the page
    plot = ex.locator(".tvz-cv").evaluate("el => el.tvz.plot()")
    page.mouse.dblclick(plot["left"] + 5, plot["top"] + 5)
    expect(foot).to_contain_text("bytes [0 B, 4 KiB) · drag across the bars to zoom")

    # 4b. The storage lane: its tooltip names the storage and the marks under the mouse.
    qkv = _locate(ex, "qkv.weight")
    page.mouse.move(qkv["x0"] + 3, qkv["y"] - 20)  # storage #1's extent, one lane above qkv.weight
    expect(tip).to_contain_text("storage #1 · 3 KiB")
    expect(tip).to_contain_text("read by ≥ 2 bars: bytes [0 B, 3 KiB)")

    # 5. Grouping toggle: one bar for the tied pair, the canvas changes.
    shot = ex.locator(".tvz-cv-scroll canvas").screenshot()
    ex.get_by_role("button", name="exact span", exact=True).click()
    expect(ex.locator(".tvz-status")).to_contain_text("grouped by exact span")
    wte = _locate(ex, "wte.weight")
    page.mouse.move(wte["x"], wte["y"])
    expect(tip).to_contain_text("wte.weight ≡ lm_head.weight")
    assert ex.locator(".tvz-cv-scroll canvas").screenshot() != shot
    ex.screenshot(path=str(SHOTS / "canvas_by_span.png"))
    assert not page.errors, page.errors


def test_canvas_scrolls_to_the_last_of_100k_lanes(lab, page):
    from playwright.sync_api import expect

    open_notebook(page, lab, "big.ipynb")
    run_all(page)
    ex = _explorer(page, timeout=240_000)  # analysing and planning 100,001 views takes a while
    expect(ex.locator(".tvz-cv-caption")).to_have_text("100,001 of 100,001 tensors shown", timeout=120_000)
    lanes = ex.locator(".tvz-cv").evaluate("el => el.tvz.lanes()")
    assert lanes == 100_002  # the storage extent and a lane per view
    scroller = ex.locator(".tvz-cv-scroll")
    scroller.scroll_into_view_if_needed()
    scroller.evaluate("el => { el.scrollTop = el.scrollHeight; }")
    foot = ex.locator(".tvz-cv-foot")
    expect(foot).to_contain_text("–100,002 of 100,002")
    last = ex.locator(".tvz-cv").evaluate("el => el.tvz.locate('v99999')")
    page.mouse.move(last["x"], last["y"])
    expect(ex.locator(".tvz-tip")).to_contain_text("v99999")
    expect(ex.locator(".tvz-tip")).to_contain_text("bytes [1.526 MiB, 1.526 MiB) · 16 B")
    ex.screenshot(path=str(SHOTS / "canvas_100k_last_lane.png"))
    assert not page.errors, page.errors


@pytest.mark.parametrize("width", [1024, 1400])
def test_gallery_screenshots(lab, browser, width):
    """The tiny model and a 70B-sized Llama on meta, in a 1024 px (sidebar open) and a 1400 px Lab."""
    from playwright.sync_api import expect

    for name in ("explore.ipynb", "llama.ipynb"):
        pg = browser.new_page(viewport={"width": width, "height": 1000})
        pg.set_default_timeout(120_000)
        errors = []
        pg.on("console", lambda m, errors=errors: m.type == "error" and errors.append(m.text))
        open_notebook(pg, lab, name)
        if not pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").count():
            pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # open the sidebar
        run_all(pg)
        ex = _explorer(pg, timeout=120_000)
        expect(ex.locator(".tvz-cv-caption")).to_contain_text("tensors shown", timeout=120_000)
        box = ex.locator(".tvz-cv-scroll canvas").bounding_box()
        assert box["width"] >= 320
        ex.scroll_into_view_if_needed()
        stem = "tiny" if name == "explore.ipynb" else "llama70b_meta"
        pg.screenshot(path=str(SHOTS / f"explorer_{stem}_{width}.png"))
        pg.close()
        assert not errors, errors
