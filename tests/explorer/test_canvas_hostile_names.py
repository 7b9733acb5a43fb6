"""Hostile tensor names through the browser canvas: the browser shows them as the static HTML
table does (controls, bidi overrides, newlines and lone surrogates as visible escapes), and
what Python keeps of them, and what a click in the browser sends back (the escaped form), must
still name the layout's own tensors."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.geometry_node import run_geometry

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
    """A name holding U+2424 (once the wire's newline sign) stays itself: selecting any view then
    compares the drawn views with the layout's own (it raised KeyError for 'a\\nb')."""
    lay = hostile_layout()
    c = DiagramCanvas()
    c.show(diagram(lay, max_lanes=ALL_LANES), lay)
    assert sorted(c.drawn_names) == sorted(HOSTILE)
    c.selected = ["plain"]
    assert c.selected == ["plain"]
    code = dict(zip(c.drawn_names, c.relations["code"]))
    assert code["plain"] == 1 and code["z" * 20_000] == 6  # selected; overlaps (bytes [20, 52) and [24, 56))


@pytest.mark.parametrize("name", ["n\nl", "sur\ud800", "a\u2424b", "\u202eevil"])
def test_a_click_in_the_browser_selects_the_tensor(name):
    """What the browser sends back for a hostile name (its decoded form) selects that tensor."""
    lay = hostile_layout()
    ex = tv.explore(lay, snapshot=False)
    ex.canvas.selected = [wire.browser_form(name)]
    assert ex.selected == [name] and ex.canvas.selected == [name]
    assert dict(zip(ex.canvas.drawn_names, ex.canvas.relations["code"]))[name] == 1


def test_browser_form_is_what_the_browser_decodes(tmp_path):
    """wire.browser_form agrees with geometry.js lines/frontDecode in node (TextDecoder)."""
    names = ["plain", "n\nl", "sur\ud800x", "\udfff", "a\u2424b", "é😀", "<b>&\"'\\", "r\u202el", "n\nm"]
    prefix, suffix, rest = wire.affix_code(names)
    out = run_geometry(
        tmp_path,
        f"const bytes = new Uint8Array({json.dumps(list(wire.text(rest)))});\n"
        f"const rest = g.lines(new DataView(bytes.buffer), {len(rest)});\n"
        f"console.log(JSON.stringify(g.frontDecode(rest, {json.dumps(prefix)}, {json.dumps(suffix)})));\n",
    )
    assert out == [wire.browser_form(n) for n in names]
    assert wire.browser_form("sur\ud800x") == "sur\\ud800x" and wire.browser_form("n\nl") == "n\\nl"


def test_a_name_that_is_another_names_browser_form_selects_itself():
    """'a\\\\nb' (a backslash) exists and 'a\\nb' reads as it in the browser: a click on it
    means itself."""
    w = torch.zeros(8)
    lay = tv.analyze({"a\\nb": w[:4], "a\nb": w[2:]})
    c = DiagramCanvas()
    c.show(diagram(lay, max_lanes=ALL_LANES), lay)
    c.selected = ["a\\nb"]
    assert c.selected == ["a\\nb"]


def decoded(p: dict, key: str, prefix: str = "", suffix: str = "") -> list[str]:
    """A text column as the browser reads it (affix-coded when prefix/suffix columns are named)."""
    rest = p[key].decode("utf-8").split("\n")
    if not prefix:
        return rest
    pre, suf = p[prefix], p[suffix] or bytes(len(p[prefix]))
    out, prev = [], ""
    for a, b, r in zip(pre, suf, rest):
        prev = prev[:a] + r + prev[len(prev) - b :]
        out.append(prev)
    return out


def test_the_canvas_shows_controls_and_bidi_as_escapes():
    """As the static HTML table and the PNG do: a right-to-left override in a name is shown as
    '\\u202e', not obeyed ('bidi\\u202eexe.txt' would read 'biditxt.exe'), in the lanes' names,
    the overview's names and labels and the storage tags."""
    from tensorviz.core.names import terminal
    from tensorviz.explorer.payload import payload

    w = torch.zeros(64)
    sd = {"bidi\u202eexe.txt": w[:8], "n\nl": w[4:12], "zw\u200bj": torch.zeros(3)}
    sd.update({f"solo\u202e{i}": torch.zeros(2) for i in range(40)})
    lay = tv.analyze(sd)
    p = payload(diagram(lay, overview=True), lay)  # lanes: storage #0; the rest folded (overview names)
    shown = decoded(p, "names", "name_prefix", "name_suffix")
    assert shown == [terminal(n) for n in ("bidi\u202eexe.txt", "n\nl")] == ["bidi\\u202eexe.txt", "n\\nl"]
    assert decoded(p, "ov_names", "ov_name_prefix", "ov_name_suffix")[:2] == ["zw\\u200bj", "solo\\u202e0"]
    assert all("\\u202e" in t for t in decoded(p, "ov_labels") if "solo" in t)
    for key, value in p.items():
        assert not isinstance(value, bytes) or "\u202e".encode() not in value, key
