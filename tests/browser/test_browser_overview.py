"""What the PNG draws that the canvas draws too, in a real JupyterLab (headless Chromium, Python
Playwright): the overview of every storage of a 70B-sized Llama with tied embeddings on ``meta``,
all storages drawn (hover a cell: its storage is named; click it: the lanes scroll to it), the
bytes views address past a freed storage's end (their pixels and tooltip), and a model map and
module list where nothing is clipped in a 1024-px and a 1400-px window with the JupyterLab
sidebar open.

Like ``test_browser.py``: needs Debian's ``chromium`` and the ``playwright`` package, else it is
skipped with the reason. Screenshots go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import pytest

from tests.helpers.lab_notebooks import FREED, LLAMA_TIED
from tests.helpers.labserver import (
    SHOTS,
    chromium,
    lab_server,
    open_notebook,
    run_all,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

LANE_H = 20  # canvas.js: pixels a lane

# Every element of the model map that ends outside the panel, or whose text is cut (scrollWidth
# past its box) without a scrollbar of its own; the tree list scrolls sideways in its own box.
CLIPPED = """panel => { const box = panel.getBoundingClientRect(), out = [];
  for (const el of panel.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width || el.closest('.widget-select select')) continue;  // checked below
    if (r.right > box.right + 0.5) out.push(`${el.tagName}.${el.className} ends at ${r.right}, the panel at ${box.right}`);
    else if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'auto')
      out.push(`${el.tagName}.${el.className} text cut: ${el.scrollWidth} > ${el.clientWidth}`);
  }
  const list = panel.querySelector('.widget-select');  // the tree's rows fit its box
  if (list.scrollWidth > list.clientWidth + 1) out.push(`tree rows need ${list.scrollWidth} px of ${list.clientWidth}`);
  return out; }"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed in this environment")
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(root, "llama.ipynb", [LLAMA_TIED])
    write_notebook(root, "freed.ipynb", [FREED])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _open(browser, lab, name: str, width: int):
    """A page of ``width`` px with the sidebar open, the notebook run, its explorer drawn."""
    from playwright.sync_api import expect

    pg = watched_page(browser, width, 1000, 120_000)
    open_notebook(pg, lab, name)
    if not pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").count():
        pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # open the sidebar
    run_all(pg)
    ex = pg.locator(".jp-OutputArea-output .tvz-explorer").first
    expect(ex.locator(".tvz-cv-caption")).to_contain_text("tensors shown")
    expect(pg.locator(".jp-Notebook")).not_to_contain_text("Error displaying widget")
    return pg, ex


def _pixel(ex, x: float, y: float) -> list[int]:
    return ex.locator(".tvz-cv").evaluate("(el, p) => el.tvz.pixel(p[0], p[1])", [x, y])


@pytest.mark.parametrize("width", [1024, 1400])
def test_overview_hover_names_a_storage_click_scrolls_to_it(lab, browser, width):
    from playwright.sync_api import expect

    pg, ex = _open(browser, lab, "llama.ipynb", width)
    ov = ex.locator(".tvz-ov")
    expect(ov.locator(".tvz-ov-title")).to_contain_text("every storage, in order: 724 storages, cells sized by bytes")
    expect(ov.locator(".tvz-ov-legend")).to_contain_text("simple 723")
    expect(ov.locator(".tvz-ov-legend")).to_contain_text("tied 1")  # the one storage that differs
    expect(ov.locator(".tvz-ov-labels li").first).to_contain_text("#0 model.embed_tokens.weight")
    ov.scroll_into_view_if_needed()
    # storage #40 is layers.4's o_proj (8192 x 8192 float32): its cell shows the PNG's colour
    cell = ov.evaluate("el => el.tvz.cell(40)")
    rgb = ov.locator("canvas").evaluate(
        "(c, p) => { const r = c.getBoundingClientRect(), k = c.width / r.width;"
        " return Array.from(c.getContext('2d').getImageData(Math.floor((p[0] - r.left) * k),"
        " Math.floor((p[1] - r.top) * k), 1, 1).data).slice(0, 3); }",
        [cell["x"], cell["y"]],
    )
    assert rgb == [int(cell["color"][i : i + 2], 16) for i in (1, 3, 5)], (rgb, cell)
    pg.mouse.move(cell["x"], cell["y"])
    tip = ex.locator(".tvz-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text("storage #40 · 256 MiB · simple")
    expect(tip).to_contain_text("model.layers.4.self_attn.o_proj.weight")
    expect(tip).to_contain_text("click: scroll the lanes to it")
    pg.screenshot(path=str(SHOTS / f"explorer_overview_hover_{width}.png"))
    # click: the lanes scroll so that storage's row is in view, marked
    pg.mouse.click(cell["x"], cell["y"])
    root = ex.locator(".tvz-cv")
    expect(root).to_have_attribute("data-focus-lane", str(cell["lane"]))  # set at once; the lanes redraw next frame
    root.evaluate(
        "(el, lane) => new Promise(ok => { const done = () => +el.dataset.firstLane <= lane && lane < +el.dataset.lastLane;"
        " const poll = () => (done() ? ok() : requestAnimationFrame(poll)); setTimeout(ok, 10000); poll(); })",
        cell["lane"],
    )
    first, last = int(root.get_attribute("data-first-lane")), int(root.get_attribute("data-last-lane"))
    assert first <= cell["lane"] < last, (first, cell["lane"], last)
    box = ex.locator(".tvz-cv-scroll").bounding_box()
    where = root.evaluate("el => el.tvz.locate('model.layers.4.self_attn.o_proj.weight')")
    assert box["y"] < where["y"] < box["y"] + box["height"]
    pg.mouse.move(where["x"], where["y"])
    expect(tip).to_contain_text("model.layers.4.self_attn.o_proj.weight")
    expect(tip).to_contain_text("float32[8192, 8192]")
    # the model map and the module list: nothing clipped (text wraps, the tree list scrolls)
    expect(ex.locator(".tvz-mv-caption")).to_contain_text("model map: the whole model")
    ex.locator(
        ".tvz-modules .jupyter-widget-Collapse-header, .tvz-modules .p-Collapse-header, .tvz-modules .lm-Collapse-header"
    ).first.click()
    panel = ex.locator(".tvt-panel")
    expect(panel).to_be_visible()
    panel.scroll_into_view_if_needed()
    clipped = panel.evaluate(CLIPPED)
    assert clipped == [], "\n".join(clipped)
    box, frame = ex.locator(".tvz-mv canvas").bounding_box(), ex.locator(".tvz-map").bounding_box()
    assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 0.5, (box, frame)  # the map fits its box
    pg.screenshot(path=str(SHOTS / f"explorer_model_map_{width}.png"))
    assert not pg.errors, pg.errors
    pg.close()


def test_past_end_layer_of_a_freed_storage(lab, browser):
    from playwright.sync_api import expect

    pg, ex = _open(browser, lab, "freed.ipynb", 1400)
    root = ex.locator(".tvz-cv")
    expect(root.locator(".tvz-cv-legend")).to_contain_text("past its storage's end (storage freed: no memory there)")
    w = root.evaluate("el => el.tvz.locate('w')")  # w reads [0, 4 KiB): all of it past the end now
    y = w["y"] - LANE_H  # the storage row above w's lane
    # bytes [0, 512) of the storage row, where no other mark lies: the PNG's past-end hatch,
    # light grey crossed by purple lines, and nothing else
    xs = [round(w["x0"] + k) for k in range(3, 40)]
    seen = {tuple(_pixel(ex, x, y)[:3]) for x in xs} | {tuple(_pixel(ex, xs[0], y + dy)[:3]) for dy in range(-4, 5)}
    assert seen == {(244, 244, 244), (122, 1, 119)}, seen
    pg.mouse.move(w["x0"] + 10, y)
    tip = ex.locator(".tvz-tip")
    expect(tip).to_contain_text("storage #0 · 0 B · freed")
    expect(tip).to_contain_text("past its storage's end (storage freed: no memory there): bytes [0 B, 4 KiB) · 4 KiB")
    ex.locator(".tvz-cv-scroll").screenshot(path=str(SHOTS / "explorer_past_end.png"))
    v = root.evaluate("el => el.tvz.locate('v')")
    pg.mouse.move(v["x"], v["y"])
    expect(tip).to_contain_text(
        "reads past its storage's end (0 B): storage freed, bytes [512 B, 2.5 KiB) have no memory"
    )
    assert not pg.errors, pg.errors
    pg.close()
