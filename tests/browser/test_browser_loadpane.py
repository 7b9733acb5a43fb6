"""The explorer's load-check pane in a real JupyterLab (``tv.explore(model, load=source)``).

A tied model and its state dict saved under ``module.`` (a DDP wrapper's prefix) with one
hostile key: the pane says the load raises, lists the missing and unexpected names, marks the
untouched ones in the canvas (the badge's pixels, the legend's words); picking another loader
redraws the verdict; a click on a missing name selects it in the canvas (the kernel's
``ex.selected``, the row lit). Screenshots at 1024 and 1400 px, light and dark:
``test-artifacts/browser/loadpane_*.png``.
"""

from __future__ import annotations

import pytest

from tests.helpers.labserver import SHOTS, lab_server, open_notebook, run_all, run_cell, set_theme, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

SETUP = """\
import collections, torch
import tensorviz as tv
from torch import nn

class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(50, 16)
        self.ln = nn.LayerNorm(16)
        self.lm_head = nn.Linear(16, 50, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("<b>bold</b>", torch.zeros(2))  # a hostile name: shown as text

model = TiedLM()
sd = collections.OrderedDict(("module." + k, v.clone()) for k, v in model.state_dict().items())
ex = tv.explore(model, load=sd, snapshot=False)
ex"""
SELECTED = 'print("SEL", ex.selected)'


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(root, "load.ipynb", [SETUP, SELECTED])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _open(page, lab: str):
    from playwright.sync_api import expect

    open_notebook(page, lab, "load.ipynb")
    run_all(page)
    ex = page.locator(".jp-OutputArea-output .tvz-explorer").first
    expect(ex.locator(".tvz-lp-verdict")).to_have_text(
        "raises RuntimeError: Error(s) in loading state_dict for TiedLM:"
    )
    return ex


@pytest.mark.parametrize("width", [1024, 1400])
def test_pick_a_loader_click_a_missing_name(lab, page, width):
    from playwright.sync_api import expect

    page.set_viewport_size({"width": width, "height": 2200})
    ex = _open(page, lab)
    lp = ex.locator(".tvz-lp")
    missing = lp.locator('.tvz-lp-list[data-kind="missing"] .tvz-lp-name')
    expect(missing).to_have_text(["<b>bold</b>", "wte.weight", "ln.weight", "ln.bias", "lm_head.weight"])
    unexpected = lp.locator('.tvz-lp-list[data-kind="unexpected"] li')
    expect(unexpected.first).to_have_text("module.<b>bold</b>")  # escaped: the text, not markup
    assert lp.locator("b").count() == 0
    expect(lp.locator(".tvz-lp-fix pre")).to_have_text(
        "state_dict = {k.removeprefix('module.'): v for k, v in state_dict.items()}\nmodel.load_state_dict(state_dict)"
    )
    expect(lp.locator(".tvz-lp-marks")).to_have_text("marked in the diagram: ∅ 5 untouched")
    expect(ex.locator(".tvz-cv-legend")).to_contain_text("left untouched by the load (keeps its initial values)")
    # the badge at ln.weight's bar's right end, in its magenta (loadmarks.js LOAD_MARKS.untouched)
    cv = ex.locator(".tvz-cv")
    at = cv.evaluate("el => el.tvz.locate('ln.weight')")
    left = at["x1"] - 16 if at["x1"] - at["x0"] >= 18 else at["x1"] + 2  # inside a wide bar, else right of it
    px = cv.evaluate("(el, p) => el.tvz.pixel(p[0], p[1])", [left + 2, at["y"] - 5])
    assert px[:3] == [142, 1, 82], px
    ex.screenshot(path=str(SHOTS / f"loadpane_light_{width}.png"))
    # another loader: strict=False does not raise
    lp.locator("select").select_option("load_state_dict(strict=False)")
    expect(lp.locator(".tvz-lp-verdict")).to_have_text("does not raise: not clean (see the lists)")
    expect(lp.locator(".tvz-lp-verdict")).to_have_class("tvz-lp-verdict tvz-lp-warn")
    lp.locator("select").select_option("load_state_dict")
    expect(lp.locator(".tvz-lp-verdict")).to_have_text(
        "raises RuntimeError: Error(s) in loading state_dict for TiedLM:"
    )
    # a click on a missing name selects it in the canvas: the one selection
    lp.locator('.tvz-lp-list[data-kind="missing"] .tvz-lp-name', has_text="ln.weight").click()
    expect(lp.locator('.tvz-lp-list[data-kind="missing"] li.tvz-lp-lit')).to_have_text("ln.weight")
    expect(ex.locator(".tvz-cv-legend")).to_contain_text("selected")
    out = run_cell(page, 2)
    expect(out).to_contain_text("SEL ['ln.weight']")
    assert not page.errors, page.errors


def test_darkset_theme(lab, page):
    from playwright.sync_api import expect

    set_theme(lab, "JupyterLab Dark")
    try:
        for width in (1024, 1400):
            page.set_viewport_size({"width": width, "height": 2200})
            ex = _open(page, lab)
            lp = ex.locator(".tvz-lp")
            expect(lp.locator(".tvz-lp-name").first).to_be_visible()
            page.wait_for_timeout(300)
            ex.screenshot(path=str(SHOTS / f"loadpane_dark_{width}.png"))
            # the pane's words read on the dark background (computed colours, WCAG >= 4.5:1)
            ratio = lp.evaluate(
                """(el) => {
                  const rgb = (s) => s.match(/\\d+/g).slice(0, 3).map(Number);
                  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
                  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
                  let bg = null;
                  for (let e = el; e && !bg; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor; if (!c.includes('rgba(0, 0, 0, 0)') && c !== 'transparent') bg = rgb(c); }
                  const name = rgb(getComputedStyle(el.querySelector('.tvz-lp-name')).color);
                  const text = rgb(getComputedStyle(el).color);
                  return [ratio(name, bg), ratio(text, bg)];
                }"""
            )
            assert min(ratio) >= 4.5, ratio
        assert not page.errors, page.errors
    finally:
        set_theme(lab, "JupyterLab Light")
