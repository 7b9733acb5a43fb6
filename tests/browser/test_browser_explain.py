"""The interactive explain in real Chromium (no JupyterLab): its ES module rendered in a bare page
with a stand-in anywidget model fed a real payload. Hovering an element lights the storage cell
Python's plan says it reads; hovering a cell lights every element of every view reading it; the
stride playground redraws on the same storage and flags a stride that leaves it.

Needs Debian's ``chromium`` and the ``playwright`` package, else it is skipped with the reason.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.labserver import SHOTS, launched_chromium

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.explain_widget import ESM  # noqa: E402
from tensorviz.explorer.modules import linked  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def page(widget, width: int = 900) -> str:
    """A page that renders explain.js with the widget's traits; ``window.synced`` collects what
    the front end sends back."""
    return f"""<!doctype html><html><body style="margin:0"><div id="host" style="width:{width}px"></div>
<script type="module">
const T = {{ plan: {json.dumps(widget.plan)}, playground: {{}} }};
window.synced = [];
const model = {{ get: (k) => T[k], set(k, v) {{ T[k] = v; window.synced.push([k, v]); }}, save_changes() {{}}, on() {{}}, off() {{}} }};
const mod = await import(URL.createObjectURL(new Blob([{json.dumps(linked(ESM.name))}], {{ type: "text/javascript" }})));
mod.default.render({{ model, el: document.getElementById("host") }});
window.ready = true;
</script></body></html>"""


def open_page(browser, tmp_path, widget, errors):
    html = tmp_path / "explain.html"
    html.write_text(page(widget), encoding="utf-8")
    pg = browser.new_page(viewport={"width": 1000, "height": 1100})
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(html.as_uri())
    pg.wait_for_function("window.ready === true")
    return pg


def locate(pg, kind: str, a: int, b: int = 0, nth: int = 0) -> dict:
    return pg.evaluate(f"document.querySelectorAll('.tvx-canvas')[{nth}].tvx.locate('{kind}', {a}, {b})")


def test_hover_an_element_then_a_cell_then_leave_the_storage(tmp_path):
    x = torch.arange(14.0)[2:].view(3, 4)
    names = ["x", "x.t()", "x[:, ::2]"]
    plan = tv.explain(x, x.t(), x[:, ::2], names=names, interactive=True)
    from tensorviz.render.explain import explain_plan

    (strip,) = explain_plan(x, x.t(), x[:, ::2], names=names).strips
    errors: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    with launched_chromium() as browser:
        pg = open_page(browser, tmp_path, plan, errors)
        # x.t()[1, 2] is element 5 of view 1: Python says it reads cell 2 + 1·1 + 4·2 = 11
        at = locate(pg, "element", 1, 5)
        pg.mouse.move(at["x"], at["y"])
        hover = pg.evaluate("document.querySelector('.tvx-canvas').tvx.hover()")
        assert hover["cells"] == [int(strip.views[1].addresses[1, 2])] == [11]
        assert pg.locator(".tvx-info").first.inner_text() == "x.t()[1, 2]: addr = 2 + 1·1 + 4·2 = 11 → cell 11"
        pg.locator(".tvx-canvas").screenshot(path=str(SHOTS / "explain_hover_element.png"))
        # cell 6 is read by x[1, 0], x.t()[0, 1] and x[:, ::2][1, 0]
        at = locate(pg, "cell", 6)
        pg.mouse.move(at["x"], at["y"])
        hover = pg.evaluate("document.querySelector('.tvx-canvas').tvx.hover()")
        assert sorted(map(tuple, hover["elements"])) == [(0, 4), (1, 1), (2, 2)]
        assert pg.locator(".tvx-info").first.inner_text() == "cell 6: x[1, 0], x.t()[0, 1], x[:, ::2][1, 0]"
        pg.locator(".tvx-canvas").screenshot(path=str(SHOTS / "explain_hover_cell.png"))
        # the playground: x with stride (5, 1) reads past the 14-element storage
        pg.fill(".tvx-stride", "5, 1")
        pg.press(".tvx-stride", "Enter")
        flag = pg.locator(".tvx-flag").first.inner_text()
        assert flag == (
            "stride leaves the storage: element [2, 2] reads address 14, the storage holds 14 float32 "
            "elements (2 elements outside)"
        )
        synced = pg.evaluate("window.synced")
        assert synced[-1] == [
            "playground",
            {"strip": 0, "view": 0, "shape": [3, 4], "stride": [5, 1], "offset": 2, "leaves": True, "outside": 2},
        ]
        at = locate(pg, "element", 0, 11)  # x[2, 3] now reads 2 + 5·2 + 3 = 15
        pg.mouse.move(at["x"], at["y"])
        assert pg.evaluate("document.querySelector('.tvx-canvas').tvx.hover()")["cells"] == [15]
        pg.screenshot(path=str(SHOTS / "explain_playground.png"))
    assert errors == []


def test_a_big_weights_corner_hovers_its_real_cells(tmp_path):
    w = torch.zeros(4096, 4096)
    widget = tv.explain(w, w.t(), names=["w", "w.t()"], interactive=True)
    errors: list[str] = []
    with launched_chromium() as browser:
        pg = open_page(browser, tmp_path, widget, errors)
        at = locate(pg, "element", 1, 8 * 2 + 3)  # w.t()[2, 3] reads 2 + 4096·3
        pg.mouse.move(at["x"], at["y"])
        assert pg.evaluate("document.querySelector('.tvx-canvas').tvx.hover()")["cells"] == [2 + 4096 * 3]
        at = locate(pg, "cell", 4096 * 5 + 1)
        pg.mouse.move(at["x"], at["y"])
        elements = pg.evaluate("document.querySelector('.tvx-canvas').tvx.hover()")["elements"]
        assert sorted(map(tuple, elements)) == [(0, 8 * 5 + 1), (1, 8 * 1 + 5)]
        pg.locator(".tvx-canvas").screenshot(path=str(SHOTS / "explain_corner.png"))
    assert errors == []
