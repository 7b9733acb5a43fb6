"""The explorer measured in a real browser (JupyterLab + headless Chromium, Playwright), next to the
previous PNG explorer in the same run.

1. control change on a 1,000-tensor model (bench_analyze's synthetic state dict): click a
   grouping button / commit a name filter, until the canvas has drawn the new plan
   (its ``data-revision`` changes), timed inside the page (``performance.now``). The render
   cache is off (``cache_size = 0``): every change plans.
   Peer: the PNG path the explorer used before (plan with 40 lanes, matplotlib, PNG into an
   ``ipywidgets.Image``), clicked the same way, until the new ``<img>`` has loaded.
2. hover and drag-zoom frame cost with 100,000 bars on ONE lane (100,000 disjoint slices of a
   storage, grouped by overlap): event handler time + canvas draw time, per mouse move.
3. first display of a Llama-70B-sized model on ``meta`` in a fresh notebook: Shift+Enter ->
   canvas drawn (page clock), with the kernel's ``tv.explore`` time, the static fallback's share
   (matplotlib PNG + HTML in the display bundle), matplotlib's one-off import time, and the PNG
   explorer's first picture.
4. payload bytes per drawn bar (the binary columns + names) vs the PNG's bytes per drawn bar.
5. the overview of 100,000 storages (bench_scale's ``many_small`` shape, 150,778 cells): its first
   draw on the canvas, and the handler time per mouse move over its cells (hit test + tooltip).
   ``--overview`` runs only this section, ``--payload`` only ``bench_payload.py`` (kernel side: the
   payload's bytes per bar of five models, the overview's bytes per storage, no browser).

Needs Chromium (``make browser-deps``) and playwright. Run: ``.venv/bin/python bench/bench_explorer.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: tests.helpers (the JupyterLab/Chromium helpers)

from tests.helpers.labserver import CHROME_ARGS, chromium, lab_server, open_notebook, run_cell, write_notebook  # noqa: E402

SETUP = f"""\
import sys, time
sys.path.insert(0, {str(HERE)!r})
import torch, ipywidgets as W
import tensorviz as tv
from bench_analyze import synthetic_state_dict
from tensorviz.explorer.render import Renderer
from tensorviz.explorer.state import ExplorerState


class PngExplorer(W.VBox):
    '''The previous explorer's redraw path: plan (40 lanes), matplotlib, PNG into an Image.'''

    def __init__(self, layout):
        self.r = Renderer(layout, dpi=100, max_lanes=40, width=None)
        self.r.cache_size = 0
        self.toggle = W.ToggleButtons(options=["storage", "span", "overlap"])
        self.img = W.Image(format="png")
        self.img.add_class("old-png")
        super().__init__([self.toggle, self.img])
        self.toggle.observe(self.draw, names="value")
        self.draw()

    def draw(self, change=None):
        self.img.value = self.r.picture(ExplorerState(by=self.toggle.value))[1]


sd = synthetic_state_dict(1000)
ex = tv.explore(sd, snapshot=False)
ex._renderer.cache_size = 0
ex"""
OLD = "old = PngExplorer(tv.analyze(sd))\nold"
BIG = """\
flat = torch.zeros(4 * 100_000)
big = tv.explore({f"v{i}": flat[4 * i : 4 * i + 4] for i in range(100_000)}, by="overlap", snapshot=False)
big"""
OVERVIEW = f"""\
import sys
sys.path.insert(0, {str(HERE)!r})
import tensorviz as tv
from bench_scale import many_small
ov = tv.explore(many_small(125_000), all_storages=True, snapshot=False)  # every storage: the overview (a model opens on a few)
ov"""
# In the page: mouse moves over the overview's cells, the handler's time each (hit test + tooltip).
OVERVIEW_MOVES = """([host, n]) => {
  const canvas = host.querySelector("canvas"), r = canvas.getBoundingClientRect(), out = [];
  for (let k = 0; k < n; k++) {
    const x = r.left + 8 + (r.width - 16) * ((k * 37) % n) / n, y = r.top + 8 + (r.height - 16) * ((k * 53) % n) / n;
    const t0 = performance.now();
    canvas.dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
    out.push(performance.now() - t0);
  }
  return out;
}"""
LLAMA = f"""\
import sys, time, torch
import matplotlib.figure, matplotlib.backends.backend_agg  # once per kernel: not counted below
import tensorviz as tv
from tensorviz.explorer.render import Renderer
from tensorviz.explorer.state import ExplorerState
sys.path.insert(0, {str(HERE)!r})
from _models import llama_70b_on_meta
llama = llama_70b_on_meta(torch.float32)
print("BUILT")"""
LLAMA_EXPLORE = """\
t0 = time.perf_counter(); ex70 = tv.explore(llama, snapshot=False); t_new = time.perf_counter() - t0
print(f"KERNEL explore {1000 * t_new:.0f} ms")
ex70"""
LLAMA_REPORT = """\
import subprocess
r = Renderer(ex70.tensor_layout, dpi=100, max_lanes=40, width=None)
t0 = time.perf_counter(); png70 = r.picture(ExplorerState())[1]; t_old = time.perf_counter() - t0
print(f"OLD the PNG explorer's first picture of the 70B model: {1000 * t_old:.0f} ms (kernel side)")
ex70._renderer.pictures.clear()
t0 = time.perf_counter(); ex70._repr_mimebundle_(); t_bundle = time.perf_counter() - t0
cold = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                       "import matplotlib.figure, matplotlib.backends.backend_agg; print(time.perf_counter() - t)"],
                      capture_output=True, text=True).stdout.strip()
print(f"SPLIT static fallback in the bundle (capped plan + matplotlib PNG + HTML) {1000 * t_bundle:.0f} ms; "
      f"importing matplotlib in a fresh process {1000 * float(cold):.0f} ms (once per kernel)")
capped, png = ex70._renderer.picture(ex70.state)
n = len(ex70.diagram.bars)
print(f"PAYLOAD llama-70B meta: {n:,} bars, {ex70.payload_nbytes:,} B = {ex70.payload_nbytes / n:.1f} B/bar;"
      f" PNG {len(png):,} B for {len(capped.bars):,} drawn bars = {len(png) / max(len(capped.bars), 1):.0f} B/bar")"""
REPORT = """\
ex.name_filter.value = ""
def per_bar(e):
    return e.payload_nbytes / max(len(e.diagram.bars), 1)
for label, e in (("1k synthetic", ex), ("100k one lane", big)):
    capped, png = e._renderer.picture(e.state)
    print(f"PAYLOAD {label}: {len(e.diagram.bars):,} bars, {e.payload_nbytes:,} B = {per_bar(e):.1f} B/bar;"
          f" PNG {len(png):,} B for {len(capped.bars):,} drawn bars = {len(png) / max(len(capped.bars), 1):.0f} B/bar")"""
# In the page: times (Date.now) of the key press, the explorer in the DOM, the canvas drawn.
WATCH = """() => { window.__t = {key: Date.now()}; const mo = new MutationObserver(() => {
  if (!window.__t.ex && document.querySelector('.tvz-explorer')) window.__t.ex = Date.now();
  const cv = document.querySelector('.tvz-cv');
  if (cv && cv.dataset.revision && !window.__t.drawn) { window.__t.drawn = Date.now(); mo.disconnect(); } });
  mo.observe(document.body, {subtree: true, childList: true, attributes: true}); }"""

FRAMES = """async ([root, kind, n]) => {
  const canvas = root.querySelector("canvas"), r = canvas.getBoundingClientRect(), box = root.tvz.plot();
  const y = box.top + 30, out = [];
  const fire = (type, x) => canvas.dispatchEvent(new MouseEvent(type, {clientX: x, clientY: y, bubbles: true, button: 0}));
  if (kind === "drag") fire("mousedown", box.left + 2);
  for (let k = 0; k < n; k++) {
    const x = box.left + 4 + (box.width - 8) * ((k * 37) % n) / n;
    const t0 = performance.now(); fire("mousemove", x); const t1 = performance.now();
    await new Promise(requestAnimationFrame);
    out.push(t1 - t0 + Number(root.dataset.drawMs));
  }
  if (kind === "drag") window.dispatchEvent(new MouseEvent("mouseup", {clientX: box.left + box.width / 2, clientY: y}));
  return out;
}"""


def stats(ms: list[float]) -> str:
    s = sorted(ms)
    p95 = s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]
    return f"median {statistics.median(s):7.1f} ms   p95 {p95:7.1f} ms   (n={len(s)})"


# In the page: click, then wait (MutationObserver) until the canvas says it drew a new revision,
# or the old explorer's <img> has loaded a new PNG; performance.now() on both sides.
CLICK_CANVAS = """async ([root, button]) => {
  const t0 = performance.now(), before = root.dataset.revision;
  const done = new Promise((ok, fail) => {
    const mo = new MutationObserver(() => { if (root.dataset.revision !== before) { mo.disconnect(); ok(); } });
    mo.observe(root, {attributes: true, attributeFilter: ["data-revision"]});
    setTimeout(() => fail(new Error("no redraw within 30 s")), 30000);
  });
  button.click();
  await done;
  return performance.now() - t0;
}"""
ENTER_CANVAS = CLICK_CANVAS.replace("button.click();", "button.dispatchEvent(new Event('change', {bubbles: true}));")
CLICK_PNG = """async ([img, button]) => {
  const t0 = performance.now(), before = img.src;
  const done = new Promise((ok, fail) => {
    setTimeout(() => fail(new Error("no new picture within 30 s")), 30000);
    const check = () => (img.src !== before && img.complete ? ok() : requestAnimationFrame(check));
    img.addEventListener("load", () => img.src !== before && ok());
    requestAnimationFrame(check);
  });
  button.click();
  await done;
  return performance.now() - t0;
}"""


def canvas_changes(page, ex, repeat: int) -> tuple[list[float], list[float]]:
    root = ex.locator(".tvz-cv").element_handle()
    group, names = [], []
    for k in range(repeat):
        button = ex.get_by_role("button", name=("exact span", "overlap", "storage")[k % 3], exact=True)
        group.append(page.evaluate(CLICK_CANVAS, [root, button.element_handle()]))
    box = ex.get_by_placeholder("name regex, e.g. attn|mlp")
    for k in range(repeat):
        box.evaluate("(el, v) => { el.value = v; }", rf"layers\.{k}\.|p{k % 4}")
        names.append(page.evaluate(ENTER_CANVAS, [root, box.element_handle()]))
    box.evaluate("el => { el.value = ''; el.dispatchEvent(new Event('change', {bubbles: true})); }")
    return group, names


def png_changes(page, repeat: int) -> list[float]:
    old = page.locator(".jp-OutputArea-output .widget-vbox:has(img.old-png)").first
    img = old.locator("img.old-png").element_handle()
    out = []
    for k in range(repeat):
        button = old.get_by_role("button", name=("span", "overlap", "storage")[k % 3], exact=True)
        out.append(page.evaluate(CLICK_PNG, [img, button.element_handle()]))
    return out


def first_display(browser, lab: str) -> None:
    """A 70B-sized Llama on meta in a fresh notebook: Shift+Enter -> canvas drawn (page clock)."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(300_000)
    open_notebook(page, lab, "llama.ipynb")
    run_cell(page, 1)  # its stdout: the model built (torchao, imported by transformers, writes to stderr)
    expect(
        page.locator(".jp-Cell").nth(1).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    ).to_contain_text("BUILT")
    page.evaluate(WATCH)
    run_cell(page, 2)
    page.wait_for_function("() => window.__t.drawn")
    t = page.evaluate("() => window.__t")
    out = page.locator(".jp-Cell").nth(2).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    print(f"== Llama-70B-sized on meta, fresh notebook: Shift+Enter -> canvas drawn {t['drawn'] - t['key']} ms")
    print(f"  explorer in the page after {t['ex'] - t['key']} ms; " + out.inner_text().strip())
    run_cell(page, 3)
    report = page.locator(".jp-Cell").nth(3).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    expect(report).to_contain_text("PAYLOAD")
    for line in report.inner_text().strip().splitlines():
        print("  " + line)
    page.close()


def overview(browser, lab: str) -> None:
    """100,000 storages: the overview's first draw, and a mouse move over its cells."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(300_000)
    open_notebook(page, lab, "overview.ipynb")
    run_cell(page, 1)
    host = page.locator(".jp-OutputArea-output .tvz-explorer .tvz-ov").first
    expect(host).to_be_visible()
    host.scroll_into_view_if_needed()
    draw, cells = host.get_attribute("data-draw-ms"), int(host.get_attribute("data-cells"))
    moves = page.evaluate(OVERVIEW_MOVES, [host.element_handle(), 200])
    print(f"== overview of 100,000 storages ({cells:,} cells, {host.get_attribute('data-cols')} columns)")
    print(f"  first draw {float(draw):.1f} ms;  mouse move (hit test + tooltip) {stats(moves)}")
    page.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21, help="changes timed per control")
    ap.add_argument("--overview", action="store_true", help="only section 5 (the overview)")
    ap.add_argument("--payload", action="store_true", help="only bench_payload.py (kernel side, no browser)")
    args = ap.parse_args()
    if args.payload:
        import bench_payload

        bench_payload.main([])
        return
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=300_000)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root, side = Path(tmp, "root"), Path(tmp, "side")
        root.mkdir(), side.mkdir()
        write_notebook(root, "bench.ipynb", [SETUP, OLD, BIG, REPORT])
        write_notebook(root, "llama.ipynb", [LLAMA, LLAMA_EXPLORE, LLAMA_REPORT])
        write_notebook(root, "overview.ipynb", [OVERVIEW])
        with lab_server(root, side, Path(tmp, "logs")) as lab:
            browser = p.chromium.launch(executable_path=chromium(), headless=True, args=CHROME_ARGS)
            if args.overview:
                overview(browser, lab)
                browser.close()
                return
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(300_000)
            open_notebook(page, lab, "bench.ipynb")
            for cell in (1, 2):
                run_cell(page, cell)
            explorers = page.locator(".jp-OutputArea-output .tvz-explorer")
            expect(explorers.nth(0).locator(".tvz-cv-scroll canvas")).to_be_visible()
            expect(page.locator("img.old-png")).to_be_visible()
            ex = explorers.nth(0)
            group, names = canvas_changes(page, ex, args.repeat)
            old = png_changes(page, args.repeat)
            print("== 1,000-tensor model: click -> picture updated in the browser (render cache off)")
            print(f"  canvas: group by     {stats(group)}")
            print(f"  canvas: name filter  {stats(names)}")
            print(
                f"  PNG explorer: group  {stats(old)}   ({statistics.median(old) / statistics.median(group):.1f}x the canvas)"
            )

            run_cell(page, 3)
            big = explorers.nth(1)
            expect(big.locator(".tvz-cv-scroll canvas")).to_be_visible()
            big.scroll_into_view_if_needed()
            handle = big.locator(".tvz-cv").element_handle()
            print("== 100,000 bars on one lane: handler + draw per mouse move")
            for kind in ("hover", "drag"):
                print(f"  {kind:<6} {stats(page.evaluate(FRAMES, [handle, kind, 120]))}")

            run_cell(page, 4)
            report = page.locator(".jp-Cell").nth(4).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
            expect(report).to_contain_text("100k one lane")
            print("== payload")
            for line in report.inner_text().strip().splitlines():
                print("  " + line)
            page.close()
            first_display(browser, lab)
            overview(browser, lab)
            browser.close()


if __name__ == "__main__":
    main()
