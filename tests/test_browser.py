"""The explorer in a real JupyterLab, driven through headless Chromium by Python Playwright.

Starts ``jupyter lab`` from this virtual environment on 127.0.0.1 with a token and fresh
config/runtime folders, opens a notebook (written into a temporary folder) that calls
``tv.explore(...)``, runs it from the Run menu, waits for the widget to render, then clicks
"exact span" and checks that the picture really changed. Screenshots go to ``test-artifacts/``.

Needs Debian's ``chromium`` (``make browser-deps``) and the ``playwright`` Python package; without
either, the test is skipped with the reason, never passed. Follows the proven recipe in
``/work/shared/recipes/jupyterlab-browser-test/`` (its README lists the pitfalls handled here).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("TENSORVIZ_ARTIFACTS", ROOT / "test-artifacts")) / "browser"
TOKEN = "tensorviz-browser-test"
CHROME_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

NOTEBOOK_CODE = '''\
import torch
from torch import nn
import tensorviz as tv


class TinyLM(nn.Module):
    """A tied embedding/lm_head pair and q, k, v weights that view one fused qkv weight."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(64, 16)
        self.qkv = nn.Linear(16, 48)
        self.q, self.k, self.v = (nn.Linear(16, 16) for _ in range(3))
        for i, lin in enumerate((self.q, self.k, self.v)):
            lin.weight = nn.Parameter(self.qkv.weight[16 * i:16 * (i + 1)])
        self.ln = nn.LayerNorm(16)
        self.lm_head = nn.Linear(16, 64, bias=False)
        self.lm_head.weight = self.wte.weight


torch.manual_seed(0)
model = TinyLM()
ex = tv.explore(model)
ex'''


def _chromium() -> str:
    path = os.environ.get("TENSORVIZ_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.skip(
            f"Chromium not found (looked for $TENSORVIZ_CHROMIUM, `chromium` on PATH and "
            f"{path}); install Debian's package with `make browser-deps` to run this test"
        )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_notebook(folder: Path) -> Path:
    nbformat = pytest.importorskip("nbformat", reason="nbformat is needed to write the test notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# tensorviz explorer (browser test)"),
        nbformat.v4.new_code_cell(NOTEBOOK_CODE),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / "explore.ipynb"
    nbformat.write(nb, str(path))
    return path


def _isolated_env(side: Path) -> dict[str, str]:
    """Everything Jupyter, IPython, matplotlib and Chromium write goes under ``side``."""
    dirs = {
        k: side / k.lower()
        for k in (
            "JUPYTER_CONFIG_DIR",
            "JUPYTER_DATA_DIR",
            "JUPYTER_RUNTIME_DIR",
            "IPYTHONDIR",
            "MPLCONFIGDIR",
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "TMPDIR",
        )
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    # The "news" pop-up would cover the screenshots.
    labconfig = dirs["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir()
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    return dict(os.environ, **{k: str(v) for k, v in dirs.items()})


class Lab(str):
    """The server's base URL; ``.root`` is the folder it serves, ``.data_dir`` its data dir."""

    root: Path
    data_dir: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server from this virtual env; yields its base URL; SIGTERM at the end."""
    _chromium()
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed in this environment")
    root = tmp_path_factory.mktemp("labroot")
    side = tmp_path_factory.mktemp("labside")
    _write_notebook(root)
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--allow-root",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={TOKEN}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log_path = side / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=_isolated_env(side), stdout=log, stderr=subprocess.STDOUT, cwd=root)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise RuntimeError("JupyterLab did not start:\n" + log_path.read_text()[-4000:]) from None
                time.sleep(0.3)
        try:
            url = Lab(base)
            url.root, url.data_dir = root, side / "jupyter_data_dir"
            yield url
        finally:
            proc.terminate()  # SIGTERM on our own PID: the server shuts its kernels down
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            SHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(log_path, SHOTS / "server.log")


@pytest.fixture(scope="module")
def browser():
    path = _chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright Python package is needed to drive Chromium"
    )
    sync_api.expect.set_options(timeout=60_000)  # expect() has its own 5 s default
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=CHROME_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg = browser.new_page(viewport={"width": 1400, "height": 1500})
    pg.set_default_timeout(60_000)
    yield pg
    pg.screenshot(path=str(SHOTS / "page_final.png"))  # the last state, also on failure
    pg.close()


_FETCH_B64 = """async src => {
    const bytes = new Uint8Array(await (await fetch(src)).arrayBuffer());
    let s = ""; for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s); }"""


def _png_of(page, src: str):
    """The image an <img> shows (ipywidgets uses blob: URLs), decoded with PIL."""
    from PIL import Image

    data = base64.b64decode(page.evaluate(_FETCH_B64, src))
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    return Image.open(io.BytesIO(data)).convert("RGB")


def _changed_fraction(a, b) -> float:
    from PIL import ImageChops

    if a.size != b.size:
        return 1.0
    diff = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 16 else 0)
    return diff.histogram()[255] / (a.size[0] * a.size[1])


def test_explorer_renders_and_exact_span_redraws(lab, page):
    from playwright.sync_api import expect

    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    t0 = time.perf_counter()
    page.goto(f"{lab}/lab/tree/explore.ipynb?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook")
    if page.locator(".jp-Dialog").count():  # "Select Kernel" if Lab cannot choose one itself
        page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(".jp-StatusBar-Widget:has-text('Idle')")
    t_open = time.perf_counter() - t0

    # 1. Run all cells (by data-command: the label also matches "Restart Kernel and Run All").
    t1 = time.perf_counter()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.locator('li.lm-Menu-item[data-command="runmenu:run-all"]').click()
    explorer = page.locator(".jp-OutputArea-output .tvz-explorer").first
    picture = explorer.locator("img.tvz-picture")
    expect(picture).to_be_visible()
    notebook = page.locator(".jp-Notebook")
    expect(notebook).not_to_contain_text("Loading widget")
    expect(notebook).not_to_contain_text("Error displaying widget")
    page.wait_for_selector(".jp-StatusBar-Widget:has-text('Idle')")
    expect(explorer.locator("button.widget-toggle-button.mod-active")).to_have_text("storage")
    expect(explorer.locator(".tvz-status")).to_contain_text("grouped by storage")
    t_run = time.perf_counter() - t1

    # 2. The static snapshot is in the output (for kernel-less readers) but hidden while live.
    assert page.locator(".tvz-snapshot").count() == 1
    expect(page.locator(".tvz-snapshot")).to_be_hidden()

    src_before = picture.get_attribute("src")
    before = _png_of(page, src_before)  # now: Lab revokes the blob: URL once it is replaced
    explorer.scroll_into_view_if_needed()
    explorer.screenshot(path=str(SHOTS / "explorer_by_storage.png"))
    page.screenshot(path=str(SHOTS / "page_by_storage.png"))

    # 3. Click "exact span": the kernel redraws and the <img> gets a new PNG.
    t2 = time.perf_counter()
    explorer.get_by_role("button", name="exact span", exact=True).click()
    page.wait_for_function(
        "prev => { const i = document.querySelector('.tvz-explorer img.tvz-picture');"
        " return i && i.complete && i.src !== prev; }",
        arg=src_before,
    )
    t_redraw = time.perf_counter() - t2
    expect(explorer.locator("button.widget-toggle-button.mod-active")).to_have_text("exact span")
    expect(explorer.locator(".tvz-status")).to_contain_text("grouped by exact span")
    explorer.screenshot(path=str(SHOTS / "explorer_by_span.png"))
    page.screenshot(path=str(SHOTS / "page_by_span.png"))

    after = _png_of(page, picture.get_attribute("src"))
    changed = _changed_fraction(before, after)
    print(
        f"\nopen->idle {t_open:.1f}s, run-all->widget {t_run:.1f}s, click->redraw {t_redraw:.2f}s, "
        f"changed pixels {changed:.1%} ({before.size} -> {after.size})"
    )
    assert changed > 0.01, f"the picture barely changed after 'exact span' ({changed:.2%} of pixels)"

    # 4. Select a tensor: the details pane describes it.
    explorer.locator("select").last.select_option("q.weight")
    expect(explorer.locator(".tvz-details")).to_contain_text("(16, 16)")
    expect(explorer.locator(".tvz-details")).to_contain_text("within qkv.weight")

    # 5. Explain the selected view: the teaching panel appears under the explorer.
    explorer.get_by_role("button", name="explain selected").click()
    explain_img = explorer.locator(".tvz-explain img")
    expect(explain_img).to_be_visible()
    expect(explorer.locator(".tvz-explain")).to_contain_text("How each element of q.weight maps")
    explain_img.screenshot(path=str(SHOTS / "explain_q_weight.png"))

    # 6. One storage: the byte-range zoom appears; the picture shows only that storage.
    src = picture.get_attribute("src")
    explorer.locator("select").first.select_option(label="#1 qkv.weight +3 · 3.0 KiB")
    page.wait_for_function(
        "prev => { const i = document.querySelector('.tvz-explorer img.tvz-picture');"
        " return i && i.complete && i.src !== prev; }",
        arg=src,
    )
    expect(explorer.locator(".widget-hslider")).to_be_visible()
    expect(explorer.locator(".tvz-status")).to_contain_text("storage #1")
    explorer.screenshot(path=str(SHOTS / "explorer_one_storage.png"))

    # 7. A bad regex leaves a clear message in the status line.
    box = explorer.get_by_placeholder("name regex, e.g. attn|mlp")
    box.fill("attn(")
    box.press("Enter")
    expect(explorer.locator(".tvz-status")).to_contain_text("not a valid regular expression")
    explorer.screenshot(path=str(SHOTS / "explorer_bad_regex.png"))
    assert not [e for e in errors if "widget" in e.lower()], errors


@pytest.fixture(scope="module")
def executed(lab):
    """The notebook executed headlessly and saved without widget state (JupyterLab's default)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(lab.root / "explore.ipynb", as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(lab.root)}},
    ).execute()
    return nb


def _open_saved(lab, page, name: str) -> None:
    page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", state="attached")
    if page.locator(".jp-Dialog").count():
        page.locator(".jp-Dialog .jp-mod-accept").click()


def _visible_pictures(page) -> list[str]:
    """Class names of the output pictures a reader sees (decoded, on screen)."""
    return page.locator(".jp-OutputArea-output img").evaluate_all(
        "imgs => imgs.filter(i => i.complete && i.naturalWidth > 0 && i.offsetParent !== null)"
        ".map(i => i.closest('.tvz-snapshot, .tvz-static, .tvz-explorer').className)"
    )


def test_untrusted_saved_notebook_shows_the_explorer_picture_once(lab, page, executed):
    """Untrusted (as cloned from git): Lab will not render the widget view, so it falls back to the
    explorer's own escaped text/html; the snapshot keeps its hidden attribute."""
    import nbformat
    from playwright.sync_api import expect

    nbformat.write(executed, lab.root / "untrusted.ipynb")
    _open_saved(lab, page, "untrusted.ipynb")
    static = page.locator(".jp-OutputArea-output .tvz-static img")
    expect(static).to_be_visible()
    page.wait_for_function(
        "() => { const i = document.querySelector('.tvz-static img');"
        " return i && i.complete && i.naturalWidth === 1000; }"
    )
    expect(page.locator(".tvz-snapshot")).to_be_hidden()
    expect(page.locator(".tvz-static")).to_contain_text(
        "tensorviz static (run the cell for the interactive explorer): tensorviz explorer (TinyLM)"
    )
    page.locator(".tvz-static").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "saved_untrusted.png"))
    assert [c.split()[0] for c in _visible_pictures(page)] == ["tvz-static"]


def test_trusted_saved_notebook_without_kernel_shows_the_snapshot(lab, page, executed):
    """Trusted, widget state not saved, kernel gone: the widget cannot render ("Error displaying
    widget"), so the snapshot's style rule reveals it."""
    import nbformat
    from nbformat.sign import NotebookNotary
    from playwright.sync_api import expect

    nb = nbformat.from_dict(executed)
    NotebookNotary(data_dir=str(lab.data_dir)).sign(nb)  # the server's own signature store
    nbformat.write(nb, lab.root / "trusted.ipynb")
    _open_saved(lab, page, "trusted.ipynb")
    expect(page.locator(".jp-Notebook")).to_contain_text("Error displaying widget", timeout=30_000)
    snap = page.locator(".jp-OutputArea-output .tvz-snapshot img")
    expect(snap).to_be_visible()
    page.wait_for_function(
        "() => { const i = document.querySelector('.tvz-snapshot img');"
        " return i && i.complete && i.naturalWidth === 1000; }"
    )
    page.locator(".tvz-snapshot").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "saved_trusted_no_kernel.png"))
    assert [c.split()[0] for c in _visible_pictures(page)] == ["tvz-snapshot"]
