"""First display of a Llama-70B-sized model on ``meta`` as a user meets it: a fresh kernel that has
not imported matplotlib, ``tv.explore(llama)`` with its defaults (so the display bundle's static
PNG and the kernel-gone snapshot are drawn, sharing one matplotlib picture), Shift+Enter ->
canvas drawn on the page clock. Run twice per kernel kind, next to the same cell in a kernel that
imported matplotlib beforehand (the peer: what bench_explorer.py's first-display line measures).

Needs Chromium (``make browser-deps``) and playwright. Run: ``.venv/bin/python bench/bench_first_display.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: tests.helpers
sys.path.insert(0, str(HERE))

from bench_explorer import WATCH  # noqa: E402

from tests.helpers.labserver import CHROME_ARGS, chromium, lab_server, open_notebook, run_cell, write_notebook  # noqa: E402

BUILD = """\
import sys, time, torch
{warm}
import tensorviz as tv
sys.path.insert(0, {here!r})
from _models import llama_70b_on_meta
llama = llama_70b_on_meta(torch.float32)
print("BUILT matplotlib imported:", "matplotlib.figure" in sys.modules)"""
EXPLORE = """\
t0 = time.perf_counter(); ex = tv.explore(llama); t1 = time.perf_counter()
print(f"KERNEL explore {1000 * (t1 - t0):.0f} ms")
ex"""
KINDS = {"cold": "", "warm": "import matplotlib.figure, matplotlib.backends.backend_agg"}


def one(browser, lab: str, name: str) -> tuple[int, str]:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(300_000)
    open_notebook(page, lab, name)
    run_cell(page, 1)  # stdout only: importing transformers may also print warnings to stderr
    stdout = page.locator(".jp-Cell").nth(1).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    expect(stdout).to_contain_text("BUILT")
    built = stdout.inner_text()
    page.evaluate(WATCH)
    run_cell(page, 2)
    page.wait_for_function("() => window.__t.drawn")
    t = page.evaluate("() => window.__t")
    out = page.locator(".jp-Cell").nth(2).locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    expect(out).to_contain_text("KERNEL")
    detail = f"{built.strip().removeprefix('BUILT ')}; {out.inner_text().strip()}"
    page.close()
    return t["drawn"] - t["key"], detail


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=300_000)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        root, side = Path(tmp, "root"), Path(tmp, "side")
        root.mkdir(), side.mkdir()
        runs = [(kind, k) for k in range(2) for kind in KINDS]
        for kind, k in runs:
            write_notebook(root, f"{kind}{k}.ipynb", [BUILD.format(warm=KINDS[kind], here=str(HERE)), EXPLORE])
        with lab_server(root, side, Path(tmp, "logs")) as lab:
            browser = p.chromium.launch(executable_path=chromium(), headless=True, args=CHROME_ARGS)
            print("== Llama-70B-sized on meta, fresh kernel, tv.explore(llama): Shift+Enter -> canvas drawn")
            for kind, k in runs:
                ms, detail = one(browser, lab, f"{kind}{k}.ipynb")
                print(f"  {kind} #{k + 1}: {ms:5d} ms   ({detail})")
            browser.close()


if __name__ == "__main__":
    main()
