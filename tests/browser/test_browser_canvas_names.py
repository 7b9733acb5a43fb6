"""Hostile names in the real canvas (headless Chromium, no JupyterLab): the canvas's ES module
(its imports linked as data URLs, as anywidget gets it) rendered in a bare page with its styles and
a stand-in anywidget model fed a real payload. A long dotted name
(no spaces) or a 20,000-character one must stay inside its tooltip and not widen the page; a
right-to-left override is shown as an escape, as the static HTML table shows it.

Needs Debian's ``chromium`` and the ``playwright`` package, else it is skipped with the reason.
"""

from __future__ import annotations

import base64
import json

import pytest
import torch

from tests.helpers.labserver import launched_chromium

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.canvas import DiagramCanvas, esm_source  # noqa: E402
from tensorviz.explorer.render import ALL_LANES  # noqa: E402
from tensorviz.explorer.wire import browser_form  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

LORA = "model.language_model.layers.10.self_attn.q_proj.base_layer.lora_A.default.weight"
NAMES = [LORA, "bidi\u202eexe.txt", "<img src=x onerror=alert(1)>&amp;\"'\\", "z" * 20_000, "plain"]


def page(canvas: DiagramCanvas, width: int) -> str:
    """A page that renders ``canvas``'s ES module and styles with its traits (the payload's bytes
    as DataViews, as ipywidgets hands them to the browser)."""
    traits = {k: getattr(canvas, k) for k in ("vocab", "selected", "zoom")}
    for k in ("payload", "relations"):
        traits[k] = {
            c: {"b64": base64.b64encode(v).decode()} if isinstance(v, bytes) else v
            for c, v in getattr(canvas, k).items()
        }
    return f"""<!doctype html><html><head><style>{canvas._css}</style></head>
<body style="margin:0"><div id="host" style="width:{width}px"></div>
<script type="module">
const T = {json.dumps(traits)};
const bytes = (v) => {{ const s = atob(v.b64), a = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i); return new DataView(a.buffer); }};
const get = (k) => {{ const v = T[k]; if (!v || Array.isArray(v) || typeof v !== "object" || k === "vocab") return v;
  return Object.fromEntries(Object.entries(v).map(([c, x]) => [c, x && x.b64 !== undefined ? bytes(x) : x])); }};
const model = {{ get, set(k, v) {{ T[k] = v; }}, save_changes() {{}}, on() {{}}, off() {{}} }};
const mod = await import(URL.createObjectURL(new Blob([{json.dumps(esm_source())}], {{ type: "text/javascript" }})));
mod.default.render({{ model, el: document.getElementById("host") }});
window.ready = true;
</script></body></html>"""


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    """Per name: the tooltip's box, its text's widths and lines, the page's width; the lane labels."""
    w = torch.zeros(64)
    lay = tv.analyze({n: w[8 * k : 8 * k + 16] for k, n in enumerate(NAMES)})
    canvas = DiagramCanvas()
    canvas.show(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    html = tmp_path_factory.mktemp("canvas") / "names.html"
    html.write_text(page(canvas, 900), encoding="utf-8")
    out, errors = {}, []
    with launched_chromium() as browser:
        pg = browser.new_page(viewport={"width": 1000, "height": 700})
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(html.as_uri())
        pg.wait_for_function("window.ready === true")
        for name in NAMES:
            at = pg.evaluate("(n) => document.querySelector('.tvz-cv').tvz.locate(n)", browser_form(name))
            pg.mouse.move(at["x"], at["y"])
            out[name] = pg.evaluate(
                """() => { const t = document.querySelector('.tvz-tip');
                return {width: t.getBoundingClientRect().width, scroll: t.scrollWidth, client: t.clientWidth,
                        height: t.getBoundingClientRect().height, first: t.querySelector('b').textContent,
                        page: document.documentElement.scrollWidth}; }"""
            )
    assert errors == []
    return out


def test_long_names_stay_inside_their_tooltip(shown):
    for name in (LORA, "z" * 20_000):
        tip = shown[name]
        assert tip["scroll"] <= tip["client"] + 1, (name[:40], tip)  # the text wraps inside the box
        assert tip["width"] <= 460 + 16 and tip["page"] == 1000, (name[:40], tip)  # max-width + padding
    assert shown[LORA]["first"] == LORA
    assert shown["z" * 20_000]["height"] < 300  # clipped to NAME_SHOWN characters, not 20,000


def test_hostile_names_are_shown_as_text(shown):
    assert shown["bidi\u202eexe.txt"]["first"] == "bidi\\u202eexe.txt"
    assert shown["<img src=x onerror=alert(1)>&amp;\"'\\"]["first"] == "<img src=x onerror=alert(1)>&amp;\"'\\"
