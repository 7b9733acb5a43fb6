"""The explorer's module list in a real JupyterLab (headless Chromium, Python Playwright): a
click on a module in the tree filters the diagram to that module's tensors and opens the model
map there.

Like ``test_browser.py``: needs Debian's ``chromium`` and the ``playwright`` package, else it is
skipped with the reason. The screenshot goes to ``test-artifacts/browser/explorer_tree.png``.
"""

from __future__ import annotations

import pytest

from tests.helpers.labserver import (
    SHOTS,
    chromium,
    lab_server,
    launched_chromium,
    open_notebook,
    run_cell,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


MODEL = """\
import torch
from torch import nn
import tensorviz as tv


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(64, 16)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16)) for _ in range(3))
        self.lm_head = nn.Linear(16, 64, bias=False)
        self.lm_head.weight = self.wte.weight


ex = tv.explore(TinyLM(), expand_simple=True)
ex"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed in this environment")
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(
        root, "tree.ipynb", [MODEL, "print('FILTER', repr(ex.name_filter.value), sorted(ex.tensor_list.options))"]
    )
    with lab_server(root, side, SHOTS) as url:
        yield url


@pytest.fixture
def page(lab):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with launched_chromium(60_000) as browser:
        pg = browser.new_page(viewport={"width": 1500, "height": 1000})
        pg.set_default_timeout(60_000)
        try:
            yield pg
        finally:
            pg.screenshot(path=str(SHOTS / "final_tree.png"))


def test_clicking_a_module_in_the_tree_filters_the_diagram(lab, page):
    from playwright.sync_api import expect

    open_notebook(page, lab, "tree.ipynb")
    run_cell(page, 1)  # cell 0 is the title
    ex = page.locator(".jp-OutputArea-output .tvz-explorer").first
    expect(ex.locator(".tvz-cv-scroll canvas")).to_be_visible()
    ex.locator(".tvz-modules .jupyter-widget-Collapse-header").click()  # the list, folded under the map
    rows = ex.locator(".tvt-panel select")
    expect(rows).to_be_visible()
    caption = ex.locator(".tvz-cv-caption")
    before = caption.inner_text()
    labels = rows.locator("option").all_inner_texts()
    i = next(k for k, t in enumerate(labels) if t.replace("\u00a0", " ").strip().startswith("▸ blocks  ModuleList"))
    rows.select_option(index=i)  # what a click on the row does
    expect(caption).not_to_have_text(before)
    expect(ex.locator(".tvz-mv-caption")).to_contain_text("model map: blocks ·")  # the map opens there too
    out = run_cell(page, 2)
    expect(out).to_contain_text("FILTER '^blocks(\\\\.|$)' ['blocks.0.0.bias', 'blocks.0.0.weight'")
    main = ex.locator(".tvz-main")
    main.scroll_into_view_if_needed()
    main.screenshot(path=str(SHOTS / "explorer_tree.png"))  # the README's explorer picture
