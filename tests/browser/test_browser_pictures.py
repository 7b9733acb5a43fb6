"""Static pictures in a real JupyterLab (headless Chromium): issue 25, item 2 (static side).

At 1024 px (the file browser open: a ~590-px output) and 1400 px, in the light, dark and
dark high-contrast themes: ``tv.show``'s picture, the module tree and ``tv.explain``'s picture stay inside their
output (wider content scrolls inside its own box, never past the output's right edge); the
``tv.show`` SVG's smallest text is at least 9 CSS px; its text contrasts with its background
(WCAG ratio >= 4.5) in both themes, which it reads from JupyterLab's ``--jp-*`` variables.
Screenshots go to ``test-artifacts/browser/pictures_<theme>_<width>.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.labserver import (
    SHOTS,
    chromium,
    lab_server,
    launched_chromium,
    open_notebook,
    run_all,
    watched_page,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


CELLS = [
    """\
import torch
from torch import nn
import tensorviz as tv

w = torch.zeros(96, 16)
tied = ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight")
views = dict.fromkeys(tied, w)
for i in range(3):
    for p in "qkvo":
        views[f"encoder.block.{i}.layer.0.SelfAttention.{p}.weight"] = torch.zeros(16, 16)
tv.show(views, by="span", expand_simple=True)""",
    """\
class Deep(nn.Module):
    def __init__(self):
        super().__init__()
        inner = nn.Sequential(*[nn.Linear(8, 8) for _ in range(2)])
        self.a_module_with_a_very_long_descriptive_name_for_testing_layout = nn.ModuleDict({"another_quite_long_child_module_name": inner})
        self.head = nn.Linear(8, 8, bias=False)
        self.tail = nn.Linear(8, 8, bias=False)
        self.tail.weight = self.head.weight

tv.analyze(Deep()).tree()""",
    """\
x = torch.arange(24.0).reshape(4, 6)
tv.explain(x, x.t(), x[:, ::2])""",
]

# Per output: its right edge, the right edges of our boxes inside it, whether each box scrolls,
# and for tv.show's SVG: its drawn width, its viewBox width and the smallest glyph scale; its
# text and background colours as computed (CSS variables resolved).
MEASURE = """() => {
  const out = [];
  for (const o of document.querySelectorAll('.jp-OutputArea-output')) {
    const r = o.getBoundingClientRect();
    const boxes = [...o.querySelectorAll('.tensorviz-show, .tvt, .tensorviz-figure')].map(b => {
      const s = getComputedStyle(b), br = b.getBoundingClientRect();
      return {cls: b.className, right: br.right, scrolls: s.overflowX === 'auto' || s.overflowX === 'scroll',
              wider: b.scrollWidth > b.clientWidth + 1};
    });
    const svg = o.querySelector('.tensorviz-show svg');
    let pic = null;
    if (svg) {
      const vb = svg.viewBox.baseVal.width;
      const scales = [...svg.querySelectorAll('g[transform*="scale("]')].map(g => {
        const m = g.getAttribute('transform').match(/scale\\(([0-9.]+) /); return m ? +m[1] : null;
      }).filter(v => v);
      const text = svg.querySelector('[style*="fill: var(--jp-ui-font-color0"]');
      const bg = svg.querySelector('[style*="fill: var(--jp-layout-color0"]');
      pic = {width: svg.getBoundingClientRect().width, vb, minScale: Math.min(...scales),
             fg: text && getComputedStyle(text).fill, bg: bg && getComputedStyle(bg).fill};
    }
    out.push({right: r.right, boxes, pic});
  }
  return JSON.stringify(out);
}"""


def _rgb(css: str) -> tuple[float, ...]:
    nums = [float(v) for v in css[css.index("(") + 1 : css.index(")")].replace("/", ",").split(",")]
    return tuple(nums[:3]) + ((nums[3],) if len(nums) > 3 else (1.0,))


def _contrast(fg: str, bg: str) -> float:
    """WCAG contrast of computed CSS colours, ``fg`` blended over the (opaque) ``bg``."""
    from tensorviz.plan.colors import contrast_ratio

    f, b = _rgb(fg), _rgb(bg)
    mixed = [f[3] * v + (1 - f[3]) * u for v, u in zip(f[:3], b[:3], strict=True)]
    return contrast_ratio(
        "#" + "".join(f"{round(v):02x}" for v in mixed), "#" + "".join(f"{round(v):02x}" for v in b[:3])
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed in this environment")
    root, side = tmp_path_factory.mktemp("labroot"), tmp_path_factory.mktemp("labside")
    write_notebook(root, "pictures.ipynb", CELLS)
    with lab_server(root, side, SHOTS) as url:
        url.side = side
        yield url


def _set_theme(lab, theme: str) -> None:
    """JupyterLab's theme setting, read when the page loads."""
    folder = Path(lab.side) / "jupyter_config_dir" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "themes.jupyterlab-settings").write_text(json.dumps({"theme": theme}))


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark", "JupyterLab Dark High Contrast"])
def test_static_pictures_fit_and_follow_the_theme(lab, theme):
    from playwright.sync_api import expect

    SHOTS.mkdir(parents=True, exist_ok=True)
    _set_theme(lab, theme)
    tag = {"JupyterLab Light": "light", "JupyterLab Dark": "dark"}.get(theme, "high-contrast")
    with launched_chromium(120_000) as browser:
        for width in (1024, 1400):
            page = watched_page(browser, width, 900, 120_000)
            open_notebook(page, lab, "pictures.ipynb")
            expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
            run_all(page)
            expect(page.locator(".jp-OutputArea-output .tensorviz-figure svg")).to_have_count(1)
            expect(page.locator(".jp-OutputArea-output .tvt")).to_have_count(1)
            page.wait_for_timeout(500)
            page.screenshot(path=str(SHOTS / f"pictures_{tag}_{width}.png"))
            for k, what in enumerate(("show", "tree", "explain")):  # each output, scrolled into view
                out = page.locator(".jp-OutputArea-output").nth(k)
                out.scroll_into_view_if_needed()
                out.screenshot(path=str(SHOTS / f"pictures_{what}_{tag}_{width}.png"))
            outputs = json.loads(page.evaluate(MEASURE))
            page.close()
            boxes = [(o["right"], b) for o in outputs for b in o["boxes"]]
            assert {b["cls"].split()[0] for _, b in boxes} >= {"tensorviz-show", "tvt", "tensorviz-figure"}
            for right, box in boxes:  # inside the output; wider content scrolls inside the box
                assert box["right"] <= right + 0.5, (width, box)
                assert box["scrolls"] or not box["wider"], (width, box)
            pic = next(o["pic"] for o in outputs if o["pic"])
            smallest = 100 * pic["minScale"] * pic["width"] / pic["vb"]
            assert smallest >= 9, (width, pic)
            assert _contrast(pic["fg"], pic["bg"]) >= 4.5, (theme, pic)
