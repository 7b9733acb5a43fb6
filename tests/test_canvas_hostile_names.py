"""Hostile tensor names through the browser canvas: what Python keeps of them, and what a
click in the browser sends back (the wire writes a newline as U+2424 and a lone surrogate
reaches the browser as U+FFFD), must still name the layout's own tensors."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer import wire  # noqa: E402
from tensorviz.explorer.canvas import DiagramCanvas  # noqa: E402
from tensorviz.explorer.render import ALL_LANES  # noqa: E402
from tensorviz.plan.diagram import diagram  # noqa: E402

HOSTILE = ["a\u2424b", "n\nl", "sur\ud800", "<b>&\"'\\", "\u202eevil", "z" * 20_000, "plain"]


def hostile_layout() -> tv.Layout:
    w = torch.zeros(64)
    return tv.analyze({name: w[k : k + 8] for k, name in enumerate(HOSTILE)})


def test_the_canvas_keeps_the_layouts_own_names():
    """A name holding U+2424 (the wire's newline sign) stays itself: selecting any view then
    compares the drawn views with the layout's own (it raised KeyError for 'a\\nb')."""
    lay = hostile_layout()
    c = DiagramCanvas()
    c.show(diagram(lay, max_lanes=ALL_LANES), lay)
    assert sorted(c.drawn_names) == sorted(HOSTILE)
    c.selected = ["plain"]
    assert c.selected == ["plain"]
    code = dict(zip(c.drawn_names, c.rel))
    assert code["plain"] == 1 and code["z" * 20_000] == 6  # selected; overlaps (bytes [20, 52) and [24, 56))


@pytest.mark.parametrize("name", ["n\nl", "sur\ud800", "a\u2424b"])
def test_a_click_in_the_browser_selects_the_tensor(name):
    """What the browser sends back for a hostile name (its decoded form) selects that tensor."""
    lay = hostile_layout()
    ex = tv.explore(lay, snapshot=False)
    ex.canvas.selected = [wire.browser_form(name)]
    assert ex.selected == [name] and ex.canvas.selected == [name]
    assert dict(zip(ex.canvas.drawn_names, ex.canvas.rel))[name] == 1


def test_browser_form_is_what_the_browser_decodes(tmp_path):
    """wire.browser_form agrees with geometry.js lines/frontDecode in node (TextDecoder)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: geometry.js cannot be run here")
    names = ["plain", "n\nl", "sur\ud800x", "\udfff", "a\u2424b", "é😀", "<b>&\"'\\"]
    prefix, suffix, rest = wire.affix_code(names)
    geometry = Path(__file__).resolve().parents[1] / "tensorviz" / "explorer" / "geometry.js"
    script = tmp_path / "forms.mjs"
    script.write_text(
        f"import * as g from {json.dumps(geometry.as_uri())};\n"
        f"const bytes = new Uint8Array({json.dumps(list(wire.text(rest)))});\n"
        f"const rest = g.lines(new DataView(bytes.buffer), {len(rest)});\n"
        f"console.log(JSON.stringify(g.frontDecode(rest, {json.dumps(prefix)}, {json.dumps(suffix)})));\n"
    )
    out = json.loads(subprocess.run([node, str(script)], capture_output=True, text=True, check=True).stdout)
    assert out == [wire.browser_form(n) for n in names]
    assert wire.browser_form("sur\ud800x") == "sur\ufffd\ufffd\ufffdx" and wire.browser_form("n\nl") == "n\u2424l"


def test_a_name_that_is_another_names_browser_form_selects_itself():
    """'a\\u2424b' exists and 'a\\nb' reads as it in the browser: a click on it means itself."""
    w = torch.zeros(8)
    lay = tv.analyze({"a\u2424b": w[:4], "a\nb": w[2:]})
    c = DiagramCanvas()
    c.show(diagram(lay, max_lanes=ALL_LANES), lay)
    c.selected = ["a\u2424b"]
    assert c.selected == ["a\u2424b"]
