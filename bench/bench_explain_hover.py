"""A hover in the interactive explain of a 4096 × 4096 weight's corner (``w`` and ``w.t()``): the
browser's work per hover (hit test, cell ↔ element lookup, full canvas redraw), measured in
headless Chromium with ``performance.now()`` around the mousemove handler, over real mouse moves
and over dispatched events. Budget: 16 ms per frame. Peer, same run: redrawing the same panel
statically in the kernel (``tv.explain`` + PNG encoding), which is what a hover would cost if
each one went back to Python.

Needs Chromium and playwright. Run: ``.venv/bin/python bench/bench_explain_hover.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: tests.helpers

import torch  # noqa: E402

import tensorviz as tv  # noqa: E402
from tensorviz.render.mpl.figure import png_bytes  # noqa: E402
from tests.browser.test_browser_explain import page  # noqa: E402
from tests.helpers.labserver import CHROME_ARGS, chromium  # noqa: E402

DISPATCH = """(n) => {
  const c = document.querySelector('.tvx-canvas'), r = c.getBoundingClientRect(), out = [];
  for (let i = 0; i < n; i++) {
    const kind = i % 2 ? 'element' : 'cell';
    const at = kind === 'cell' ? c.tvx.locate('cell', [0, 4096, 8192, 12288][i % 4] + (i % 8)) : c.tvx.locate('element', i % 2, i % 64);
    const t0 = performance.now();
    c.dispatchEvent(new MouseEvent('mousemove', { clientX: at.x, clientY: at.y, bubbles: true }));
    out.push(performance.now() - t0);
  }
  return out;
}"""


def stats(ms: list[float]) -> str:
    ms = sorted(ms)
    return f"median {statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * (len(ms) - 1))]:.2f} ms, max {ms[-1]:.2f} ms"


def main() -> None:
    from playwright.sync_api import sync_playwright

    w = torch.zeros(4096, 4096)
    widget = tv.explain(w, w.t(), names=["w", "w.t()"], interactive=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        html = Path(tmp) / "bench.html"
        html.write_text(page(widget), encoding="utf-8")
        browser = p.chromium.launch(executable_path=chromium(), headless=True, args=CHROME_ARGS)
        pg = browser.new_page(viewport={"width": 1000, "height": 1100}, device_scale_factor=2)
        pg.goto(html.as_uri())
        pg.wait_for_function("window.ready === true")
        real = []
        for i in range(200):
            at = pg.evaluate(f"document.querySelector('.tvx-canvas').tvx.locate('element', {i % 2}, {i % 64})")
            pg.mouse.move(at["x"], at["y"])
            real.append(pg.evaluate("document.querySelector('.tvx-canvas').tvx.lastHoverMs"))
        dispatched = pg.evaluate(DISPATCH, 1000)
        browser.close()
    peer = []
    for _ in range(5):
        t0 = time.perf_counter()
        png_bytes(tv.explain(w, w.t(), names=["w", "w.t()"]))
        peer.append(1000 * (time.perf_counter() - t0))
    print("interactive explain of a 4096 x 4096 weight's corner (w and w.t(), 128 elements, 64 cells), 2x HiDPI")
    print(f"  browser, 200 real mouse moves:      {stats(real)}")
    print(f"  browser, 1000 dispatched mousemoves: {stats(dispatched)}")
    print(f"  peer, static redraw in the kernel (tv.explain + PNG): {stats(peer)}")
    print(
        f"  budget 16 ms per frame: p95 {'within' if sorted(dispatched)[949] <= 16 else 'OVER'}; "
        f"peer / browser median = {statistics.median(peer) / statistics.median(dispatched):.0f}x"
    )


if __name__ == "__main__":
    main()
