"""The explorer in the other frontends, driven through headless Chromium: marimo (``marimo run``),
Jupyter Notebook 7 and Voila, each a real server on 127.0.0.1 started from this virtual env.

- marimo: ``tv.explore(model)`` as a cell's output is live (marimo asks ``_display_``; the
  controls are marimo's own elements driving the explorer's): the canvas draws, a hover names
  the exact bytes, and choosing "exact span" in the controls redraws the canvas (a new payload
  revision; the tied pair becomes one bar).
- Notebook 7 and Voila: the canvas renders from the running kernel and a hover works; the
  stand-in picture is hidden while the canvas is live (one picture on the page).

Screenshots go to ``test-artifacts/browser/frontend_*.png``.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import free_port
from tests.helpers.lab_notebooks import TINY
from tests.helpers.labserver import (
    SHOTS,
    TOKEN,
    isolated_env,
    kernels,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
PAGE_SIZE = (1300, 1000)  # the shared page fixture's viewport (tests/browser/conftest.py)

# What a reader sees: visible decoded <img> outputs and drawn explorer canvases (as in test_browser_routes).
PICTURES = """() => [...document.querySelectorAll('img, .tvz-cv-scroll canvas')]
  .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 50
    && (e.tagName === 'CANVAS' || (e.complete && e.naturalWidth > 0)))
  .map(e => e.tagName.toLowerCase())"""


@contextlib.contextmanager
def _server(cmd: list[str], cwd: Path, side: Path, probe: str) -> Iterator[None]:
    """``cmd`` running until ``probe`` answers; SIGTERM on its own PID afterwards."""
    env = isolated_env(side)  # makes the folder
    log = side / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            try:
                if probe.startswith("http"):
                    urllib.request.urlopen(probe, timeout=2).close()
                else:  # "host:port": listening is enough (a GET of Voila's page would start a kernel)
                    socket.create_connection(tuple(probe.rsplit(":", 1)), timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise RuntimeError(f"{cmd[2]} did not start:\n" + log.read_text()[-4000:]) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _hover(page, name: str) -> None:
    from playwright.sync_api import expect

    cv = page.locator(".tvz-cv")
    where = cv.evaluate("(el, name) => el.tvz.locate(name)", name)
    assert where is not None, f"{name} is not drawn"
    page.mouse.move(where["x"], where["y"])
    expect(cv.locator(".tvz-tip")).to_contain_text(name)


def _marimo_app(folder: Path) -> Path:
    model = TINY.split("ex = tv.explore")[0] + "ex = tv.explore(model)\n"
    body = "\n".join("    " + line if line.strip() else "" for line in model.splitlines())
    app = (
        "import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n"
        f"{body}\n    return (ex,)\n\n\n@app.cell\ndef _(ex):\n    ex\n    return\n"
    )
    path = folder / "explore_app.py"
    path.write_text(app)
    return path


def test_marimo_explore_is_live_with_its_controls(page, tmp_path):
    pytest.importorskip("marimo", reason="marimo is not installed (pip install -e '.[test]')")
    from playwright.sync_api import expect

    app, port = _marimo_app(tmp_path), free_port()
    cmd = [sys.executable, "-m", "marimo", "run", str(app), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--headless", "--no-token", "--no-sandbox"]
    side = tmp_path / "side"
    with _server(cmd, tmp_path, side, f"http://127.0.0.1:{port}/"):
        page.goto(f"http://127.0.0.1:{port}/")
        cv = page.locator(".tvz-cv")  # inside the anywidget's shadow root: locators pierce it
        expect(cv.locator(".tvz-cv-scroll canvas")).to_be_visible()
        expect(cv.locator(".tvz-cv-caption")).to_have_text(
            "6 of 12 tensors shown (+ 6 simple storages, 512 B, folded into one row)"
        )
        _hover(page, "q.weight")
        expect(cv.locator(".tvz-tip")).to_contain_text("bytes [0 B, 1 KiB) · 1 KiB · storage #1")
        revision = int(cv.get_attribute("data-revision"))
        page.screenshot(path=str(SHOTS / "frontend_marimo.png"), full_page=True)
        # a control: marimo's radio drives the explorer's toggle; Python replans, the canvas redraws
        page.get_by_role("radio", name="exact span").check()
        expect(cv).to_have_attribute("data-revision", str(revision + 1))
        _hover(page, "wte.weight")
        expect(cv.locator(".tvz-tip")).to_contain_text("wte.weight ≡ lm_head.weight")
        # another: the name filter
        page.get_by_role("textbox").first.fill("^q")
        page.keyboard.press("Enter")
        expect(cv.locator(".tvz-cv-caption")).to_have_text(
            "2 of 12 tensors shown (+ 2 simple storages, 256 B, folded into one row)"
        )
        page.screenshot(path=str(SHOTS / "frontend_marimo_filtered.png"), full_page=True)
    assert not page.errors, page.errors


@pytest.fixture(scope="module")
def notebook_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbroot")
    write_notebook(root, "explore.ipynb", [TINY])
    return root


def _wait_for_connected_kernel(base: str, timeout: float = 120) -> None:

    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(k["execution_state"] == "idle" and k["connections"] > 0 for k in kernels(base, TOKEN)):
            return
        time.sleep(0.5)
    raise TimeoutError("Notebook 7's kernel never connected")


def test_notebook7_renders_the_explorer_and_hovers(page, notebook_dir, tmp_path):
    pytest.importorskip("notebook", reason="Jupyter Notebook 7 is not installed (pip install -e '.[test]')")
    from playwright.sync_api import expect

    port = free_port()
    cmd = [sys.executable, "-m", "notebook", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}"]
    cmd += [f"--ServerApp.root_dir={notebook_dir}", f"--IdentityProvider.token={TOKEN}"]
    base = f"http://127.0.0.1:{port}"
    with _server(cmd, notebook_dir, tmp_path / "side", f"{base}/api/status?token={TOKEN}"):
        page.goto(f"{base}/notebooks/explore.ipynb?token={TOKEN}")
        page.wait_for_selector(".jp-Notebook")
        if page.locator(".jp-Dialog").count():
            page.locator(".jp-Dialog .jp-mod-accept").click()
        _wait_for_connected_kernel(base)  # a cell run before the kernel is connected is dropped
        page.locator(".jp-Cell").nth(1).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        cv = page.locator(".tvz-cv")
        expect(cv.locator(".tvz-cv-scroll canvas")).to_be_visible()
        cv.scroll_into_view_if_needed()
        _hover(page, "q.weight")
        expect(cv.locator(".tvz-tip")).to_contain_text("bytes [0 B, 1 KiB) · 1 KiB · storage #1")
        page.screenshot(path=str(SHOTS / "frontend_notebook7.png"))
        assert page.evaluate(PICTURES) == ["canvas"]  # the stand-in hidden while the canvas is live


def test_voila_renders_the_explorer_and_hovers(page, notebook_dir, tmp_path):
    pytest.importorskip("voila", reason="Voila is not installed (pip install -e '.[test]')")
    from playwright.sync_api import expect

    port = free_port()
    cmd = [sys.executable, "-m", "voila", str(notebook_dir / "explore.ipynb"), "--no-browser", f"--port={port}"]
    cmd += ["--Voila.ip=127.0.0.1"]
    base = f"http://127.0.0.1:{port}"
    with _server(cmd, notebook_dir, tmp_path / "side", f"127.0.0.1:{port}"):
        page.goto(base)  # Voila runs the notebook, then its page renders the widgets
        cv = page.locator(".tvz-cv")
        expect(cv.locator(".tvz-cv-scroll canvas")).to_be_visible()
        cv.scroll_into_view_if_needed()
        _hover(page, "q.weight")
        expect(cv.locator(".tvz-tip")).to_contain_text("bytes [0 B, 1 KiB) · 1 KiB · storage #1")
        page.screenshot(path=str(SHOTS / "frontend_voila.png"))
        assert page.evaluate(PICTURES) == ["canvas"]
