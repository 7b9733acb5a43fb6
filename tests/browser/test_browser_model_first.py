"""The model-first explorer at 1024 and 1400 px in a real JupyterLab, in light, dark and high
contrast themes (issue 25, items 2, 3 and 8).

Opens the seed model, a tiny GPT-2 (meta, tied) and the 70B-sized Llama (meta) with the file
browser open and checks the explorer's shape: the model map leads, the diagram draws the
storages that matter with the rest one click away, the overview only when it tells storages
apart, no empty box, and the whole explorer within about two screens at 1024 px. Then the
theme: JupyterLab Dark and Dark High Contrast, where the canvas's storage headers and names and
the map's labels must read (contrast >= 4.5:1, measured from the drawn pixels). Full-height
screenshots go to ``test-artifacts/browser/model_first_*.png``, the heights to
``model_first_heights.json`` beside them.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers.lab_notebooks import EXPLAIN, GPT2, LLAMA, SEED
from tests.helpers.labserver import (
    SHOTS,
    lab_server,
    open_notebook,
    run_all,
    set_theme,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

MODELS = {"seed": SEED, "gpt2": GPT2, "llama70b": LLAMA}
TWO_SCREENS = 1400  # px: two screens of a 1024 x 768 window, less the browser's and Lab's bars

# WCAG contrast of two [r, g, b] (0..255).
CONTRAST = """const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const contrast = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };"""
# The most contrasting pixel against the background in a box of a canvas (CSS px from its corner):
# the ink of the text drawn there.
INK = (
    """(canvas, box) => { """
    + CONTRAST
    + """ const k = canvas.width / canvas.getBoundingClientRect().width, g = canvas.getContext('2d');
  const d = g.getImageData(Math.round(box[0] * k), Math.round(box[1] * k), Math.round(box[2] * k), Math.round(box[3] * k)).data;
  const bg = [d[0], d[1], d[2]]; let best = 1;
  for (let i = 0; i < d.length; i += 4) best = Math.max(best, contrast(bg, [d[i], d[i + 1], d[i + 2]]));
  return {bg, best}; }"""
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    for stem, cell in {**MODELS, "explain": EXPLAIN}.items():
        write_notebook(root, f"{stem}.ipynb", [cell])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _open(browser, lab, stem: str, width: int, height: int = 3600):
    from playwright.sync_api import expect

    pg = watched_page(browser, width, height, 120_000)
    open_notebook(pg, lab, f"{stem}.ipynb")
    if not pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").count():
        pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # open the file browser
    run_all(pg)
    ex = pg.locator(".jp-OutputArea-output .tvz-explorer").first
    expect(ex.locator(".tvz-cv-caption")).to_contain_text("tensors shown", timeout=120_000)
    pg.wait_for_timeout(500)
    return pg, ex


def _measure(ex) -> dict:
    """Heights (px) of the explorer and of its parts, their tops, and the tensor list's empty rows."""
    return ex.evaluate(
        """(el) => {
          const top = el.getBoundingClientRect().top, box = (s) => {
            const e = el.querySelector(s); if (!e || !e.offsetParent) return null;
            const r = e.getBoundingClientRect(); return {top: Math.round(r.top - top), height: Math.round(r.height)};
          };
          const list = el.querySelector('.tvz-side select');
          return {height: Math.round(el.getBoundingClientRect().height), map: box('.tvz-map'),
                  canvas: box('.tvz-cv-scroll'), overview: box('.tvz-ov'), side: box('.tvz-side'),
                  save: box('.tvz-explorer > .widget-accordion:last-child'),
                  empty_rows: list ? Math.max(0, list.size - list.options.length) : 0};
        }"""
    )


@pytest.mark.parametrize("width", [1024, 1400])
def test_model_first_at_1024_and_1400(lab, browser, width):
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    out = SHOTS / "model_first_heights.json"
    heights = json.loads(out.read_text()) if out.exists() else {}
    for stem in MODELS:
        pg, ex = _open(browser, lab, stem, width)
        m = heights[f"{stem}_{width}"] = _measure(ex)
        ex.screenshot(path=str(SHOTS / f"model_first_{stem}_{width}.png"))
        assert m["empty_rows"] == 0, m  # no empty box under a few names
        assert m["overview"] is None, m  # seed: one storage; gpt2, llama: every storage simple but the tie
        if width == 1024:
            assert m["height"] <= TWO_SCREENS, m
        if stem == "seed":
            assert m["map"] is None  # no module tree, no map
        else:
            assert m["map"]["top"] < 80 and m["map"]["top"] < m["canvas"]["top"], m  # the map leads
            assert m["map"]["height"] >= 150, m
            expect(ex.locator(".tvz-cv-foot")).to_contain_text("lanes 1–")
        if stem == "llama70b":
            toggle = ex.get_by_role("button", name="show all 725 storages")
            expect(ex.locator(".tvz-cv-caption")).to_have_text("8 of 725 tensors shown")
            toggle.click()
            expect(ex.locator(".tvz-cv-caption")).to_have_text("725 of 725 tensors shown")
            expect(ex.locator(".tvz-ov")).to_be_hidden()  # 725 simple storages: a one-colour mosaic, not shown
        assert not pg.errors, pg.errors
        pg.close()
    out.write_text(json.dumps(heights, indent=1, sort_keys=True))


def test_the_map_names_a_tie_and_opens_a_module_on_a_click(lab, browser):
    from playwright.sync_api import expect

    pg, ex = _open(browser, lab, "gpt2", 1400, 1400)
    mv = ex.locator(".tvz-mv")
    head = mv.evaluate("el => el.tvz.cell('lm_head.weight')")
    assert head is not None and head["label"] == "weight", head
    pg.mouse.move(head["x"], head["y"])
    tip = mv.locator(".tvz-mv-tip")
    expect(tip).to_contain_text("lm_head.weight")
    expect(tip).to_contain_text("0 B counted here (0.0% of the map)")
    expect(tip).to_contain_text("128 KiB more read here, counted under another name (tied: hatched)")
    pg.screenshot(path=str(SHOTS / "model_first_gpt2_map_tie.png"))
    h0 = mv.evaluate("el => el.tvz.cell('transformer.h.0')")
    pg.mouse.click(h0["x"], h0["y"])
    expect(ex.locator(".tvz-mv-caption")).to_contain_text("model map: transformer.h.0 ·")
    expect(ex.get_by_placeholder("name regex, e.g. attn|mlp")).to_have_value(r"^transformer\.h\.0(\.|$)")
    expect(ex.locator(".tvz-cv-caption")).to_contain_text("of 29 tensors shown")
    ex.locator(".tvz-mv-up").click()
    expect(ex.locator(".tvz-mv-caption")).to_contain_text("model map: the whole model")
    assert not pg.errors, pg.errors
    pg.close()


@pytest.mark.parametrize("theme", ["JupyterLab Dark", "JupyterLab Dark High Contrast", "JupyterLab Light"])
def test_headers_and_names_read_in_everyset_theme(lab, browser, theme):
    """The storage header and the names on the canvas, and the map's labels, drawn in the
    theme's colours: each label's ink against its background >= 4.5:1, from the pixels."""
    set_theme(lab, theme)
    stem = theme.lower().replace("jupyterlab ", "").replace(" ", "_")
    pg, ex = _open(browser, lab, "gpt2", 1400, 1400)
    pg.wait_for_function(f"document.body.dataset.jpThemeName === {json.dumps(theme)}")
    pg.wait_for_timeout(500)
    root = ex.locator(".tvz-cv")
    colours = root.evaluate("el => el.tvz.theme()")
    dark = theme != "JupyterLab Light"
    assert (colours["background"] < "#808080") == dark, colours  # the canvas follows the page
    canvas = root.locator(".tvz-cv-scroll canvas")
    lw = root.evaluate("el => el.tvz.plot().left - el.querySelector('canvas').getBoundingClientRect().left")
    header = canvas.evaluate(INK, [2, 22 + 3, lw - 12, 14])  # lane 0: storage #0's header
    name = canvas.evaluate(INK, [2, 22 + 20 + 3, lw - 12, 14])  # lane 1: transformer.wte.weight
    axis = canvas.evaluate(INK, [2, 3, 40, 16])  # "bytes"
    cell = ex.locator(".tvz-mv").evaluate("el => el.tvz.cell('transformer.wte')")
    frame = ex.locator(".tvz-mv canvas").bounding_box()
    strip = ex.locator(".tvz-mv canvas").evaluate(
        INK, [cell["x"] - frame["x"] - 20, cell["y"] - frame["y"] - 6, 60, 12]
    )
    ex.screenshot(path=str(SHOTS / f"model_first_theme_{stem}.png"))
    report = {"header": header, "name": name, "axis": axis, "map_strip": strip, "theme": colours}
    (SHOTS / f"model_first_theme_{stem}.json").write_text(json.dumps(report, indent=1))
    for part in ("header", "name", "axis", "map_strip"):
        assert report[part]["best"] >= 4.5, (part, report)
    assert not pg.errors, pg.errors
    pg.close()
    if theme != "JupyterLab Light":
        set_theme(lab, "JupyterLab Light")


def test_select_a_view_then_hover_its_elements_in_the_explorers_explain(lab, browser):
    """Issue 30 in the explorer: click a view's bar, press "explain selected": the interactive
    panel of that view opens in the explorer; hovering an element lights the cell Python's plan
    says it reads, with its address formula; a second selection redraws the open panel."""
    from playwright.sync_api import expect

    from tensorviz.plan.explain import layout_plan

    pg, ex = _open(browser, lab, "explain", 1400, 1400)
    where = ex.locator(".tvz-cv").evaluate("el => el.tvz.locate('x.t()')")
    pg.mouse.click(where["x"], where["y"])  # select x.t() in the diagram
    expect(ex.locator(".tvz-side select option:checked")).to_have_text("x.t()")
    ex.get_by_role("button", name="explain selected").click()
    panel = ex.locator(".tvx-canvas").first
    expect(panel).to_be_visible()
    panel.scroll_into_view_if_needed()
    at = panel.evaluate("el => el.tvx.locate('element', 0, 5)")  # x.t()[1, 2], the 6th element
    pg.mouse.move(at["x"], at["y"])
    x = tv_layout_x()
    (strip,) = layout_plan(x).strips
    assert panel.evaluate("el => el.tvx.hover()")["cells"] == [int(strip.views[0].addresses[1, 2])] == [11]
    expect(ex.locator(".tvx-info").first).to_have_text("x.t()[1, 2]: addr = 2 + 1·1 + 4·2 = 11 → cell 11")
    ex.locator(".tvz-explain").screenshot(path=str(SHOTS / "model_first_explain_in_explorer.png"))
    other = ex.locator(".tvz-cv").evaluate("el => el.tvz.locate('x[:, ::2]')")
    pg.mouse.click(other["x"], other["y"])  # the open panel follows the selection
    expect(ex.locator(".tvz-explain")).to_contain_text("How each element of x[:, ::2] maps")
    expect(ex.locator(".tvx-canvas")).to_have_count(1)
    pg.mouse.move(1, 1)
    at = ex.locator(".tvx-canvas").first.evaluate("el => el.tvx.locate('element', 0, 5)")  # x[:, ::2][2, 1]
    pg.mouse.move(at["x"], at["y"])
    assert ex.locator(".tvx-canvas").first.evaluate("el => el.tvx.hover()")["cells"] == [2 + 4 * 2 + 2]
    assert not pg.errors, pg.errors
    pg.close()


def tv_layout_x():
    """The layout of x.t() alone, as the explorer's panel plans it (metadata only)."""
    import torch

    import tensorviz as tv

    x = torch.arange(14.0)[2:].view(3, 4)
    return tv.analyze({"x.t()": x.t()})
