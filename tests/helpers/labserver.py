"""Helpers of the real-browser tests: a JupyterLab server from this virtual env, Chromium, notebooks.

Follows the proven recipe in ``/work/shared/recipes/jupyterlab-browser-test/`` (its README lists
the pitfalls handled here: isolated config dirs, ``--allow-root``, a token, ``&reset``, the
news pop-up disabled, "Run All" by data-command, SIGTERM on our own PID).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("TENSORVIZ_ARTIFACTS", ROOT / "test-artifacts")) / "browser"  # screenshots to look at
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


def chromium() -> str:
    """Chromium's path, or skip with the reason and the fix."""
    path = os.environ.get("TENSORVIZ_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.skip(
            f"Chromium not found (looked for $TENSORVIZ_CHROMIUM, `chromium` on PATH and "
            f"{path}); install Debian's package with `make browser-deps` to run this test"
        )
    return path


def watched_page(browser, width: int, height: int, timeout: int):
    """A new page of ``width`` x ``height`` px whose console errors and uncaught exceptions
    collect in ``page.errors`` (tests assert it stays empty)."""
    pg = browser.new_page(viewport={"width": width, "height": height})
    pg.set_default_timeout(timeout)
    pg.errors = []
    pg.on("console", lambda m: m.type == "error" and pg.errors.append(m.text))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    return pg


@contextlib.contextmanager
def launched_chromium(expect_timeout: int = 60_000) -> Iterator:
    """Headless Chromium driven by Playwright, closed afterwards; skips the test, with the
    reason, where Chromium or the playwright package is missing."""
    path = chromium()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright Python package is needed to drive Chromium"
    )
    sync_api.expect.set_options(timeout=expect_timeout)  # expect() has its own 5 s default
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=CHROME_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def kernels(base: str, token: str, tries: int = 20) -> list[dict]:
    """The server's ``/api/kernels`` list. jupyter-server answers 500 now and then while a kernel
    starts (its ``last_activity`` is read before it is set), so a 5xx is asked again, up to
    ``tries`` times half a second apart, before it fails the test."""
    import urllib.error

    for attempt in range(tries):
        try:
            with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=5) as r:
                return json.load(r)
        except urllib.error.HTTPError as err:
            if err.code < 500 or attempt == tries - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def write_notebook(folder: Path, name: str, cells: list[str], title: str = "tensorviz browser test") -> Path:
    """A notebook of code cells (after a markdown title), with a kernelspec (else Lab asks)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is needed to write the test notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}")] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = folder / name
    nbformat.write(nb, str(path))
    return path


def isolated_env(side: Path) -> dict[str, str]:
    """Everything Jupyter, IPython, matplotlib and Chromium write goes under ``side``."""
    names = (
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
    dirs = {k: side / k.lower() for k in names}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    labconfig = dirs["JUPYTER_CONFIG_DIR"] / "labconfig"  # the "news" pop-up would cover screenshots
    labconfig.mkdir()
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    return dict(os.environ, **{k: str(v) for k, v in dirs.items()})


class Lab(str):
    """The server's base URL; ``.root`` is the folder it serves, ``.data_dir`` its data dir."""

    root: Path
    data_dir: Path


@contextlib.contextmanager
def lab_server(root: Path, side: Path, logs: Path) -> Iterator[Lab]:
    """A JupyterLab server serving ``root``; SIGTERM at the end, its log copied to ``logs``."""
    port = free_port()
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
        proc = subprocess.Popen(cmd, env=isolated_env(side), stdout=log, stderr=subprocess.STDOUT, cwd=root)
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
            logs.mkdir(parents=True, exist_ok=True)
            shutil.copy(log_path, logs / "server.log")


def open_notebook(page, lab: str, name: str) -> None:
    """Open a notebook in a fresh workspace and wait for an idle kernel."""
    page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook")
    if page.locator(".jp-Dialog").count():  # "Select Kernel" if Lab cannot choose one itself
        page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(".jp-StatusBar-Widget:has-text('Idle')")


def run_all(page) -> None:
    """Run -> Run All Cells (by data-command: the label also matches "Restart Kernel and Run All")."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.locator('li.lm-Menu-item[data-command="runmenu:run-all"]').click()


def run_cell(page, n: int):
    """Run code cell ``n`` (0-based among all cells) and return its output locator."""
    cell = page.locator(".jp-Cell").nth(n)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    return cell.locator(".jp-OutputArea-output")


def set_theme(lab: str, name: str) -> None:
    """Set JupyterLab's theme (``"JupyterLab Dark"``...) through its settings API, as Settings >
    Theme writes it."""
    body = json.dumps({"raw": json.dumps({"theme": name})}).encode()
    url = f"{lab}/lab/api/settings/@jupyterlab/apputils-extension:themes?token={TOKEN}"
    req = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30)
