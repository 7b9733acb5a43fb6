"""The explorer's static picture on every route a notebook takes, counted in a real browser.

``tv.explore(m)`` emits a stand-in (an ``image/png`` output of the first state) and then the
explorer; the live explorer hides the stand-in (``tensorviz/explorer/static.py`` has the table).
Each test opens one route in headless Chromium and counts the pictures a reader sees: decoded,
visible ``<img>`` elements and drawn explorer canvases. Exactly one, every time:

- JupyterLab live; JupyterLab with "Save Widget State Automatically", saved, kernel shut down and
  reopened; a trusted notebook without widget state and without a kernel; an untrusted one;
- ``jupyter nbconvert --to html --execute`` with nbclient's widget state stored (its default)
  and without, opened from ``file://`` with every other request blocked (no CDN, as offline);
  the Lab-saved notebook converted; nbconvert's sanitizing exporter.

Screenshots go to ``test-artifacts/browser/routes_*.png``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tensorviz.explorer.static import src_mark
from tests.helpers.lab_notebooks import TINY
from tests.helpers.labserver import (
    SHOTS,
    TOKEN,
    isolated_env,
    kernels,
    lab_server,
    open_notebook,
    run_all,
    watched_page,
)
from tests.helpers.labserver import write_notebook as _write

pytestmark = [pytest.mark.browser, pytest.mark.timeout(400)]

STATE = "application/vnd.jupyter.widget-state+json"
VIEW = "application/vnd.jupyter.widget-view+json"

# What a reader sees: each visible, decoded output <img> (the stand-in when its data URL carries a
# stand-in mark) and each explorer canvas that has drawn.
PICTURES = """(mark) => {
  const seen = [];
  for (const e of document.querySelectorAll('img, .tvz-explorer .tvz-cv-scroll canvas')) {
    const r = e.getBoundingClientRect();
    if (e.offsetParent === null || r.width < 50 || r.height < 20) continue;
    if (e.tagName === 'CANVAS') { seen.push('canvas'); continue; }
    if (!e.complete || e.naturalWidth === 0) continue;
    seen.push(e.src.includes(mark) ? 'stand-in' : 'img');
  }
  return seen;
}"""

#: The base64 every stand-in mark starts with (the chunk up to the explorer's id, 3-byte aligned).
MARK_PREFIX = src_mark("tvz-live-" + "0" * 32)[:52]


def pictures(page) -> list[str]:
    return page.evaluate(PICTURES, MARK_PREFIX)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab with the widget manager's "Save Widget State Automatically" on."""
    root, side = tmp_path_factory.mktemp("routesroot"), tmp_path_factory.mktemp("routesside")
    settings = side / "jupyter_config_dir" / "lab" / "user-settings" / "@jupyter-widgets" / "jupyterlab-manager"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": True}))
    _write(root, "explore.ipynb", [TINY])
    with lab_server(root, side, SHOTS) as url:
        yield url


def _open_saved(lab, page, name: str) -> None:
    page.goto(f"{lab}/lab/tree/{name}?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", state="attached")
    if page.locator(".jp-Dialog").count():
        page.locator(".jp-Dialog .jp-mod-accept").click()


def _settle(page, want: list[str], timeout_ms: int = 60_000) -> list[str]:
    """The pictures once they are ``want`` (or whatever they are after ``timeout_ms``)."""
    try:
        page.wait_for_function(
            f"(m) => JSON.stringify(({PICTURES})(m)) === {json.dumps(json.dumps(want))}",
            arg=MARK_PREFIX,
            timeout=timeout_ms,
        )
    except Exception:  # noqa: BLE001 - the assertion below shows what was seen instead
        pass
    return pictures(page)


def _shut_down_kernels(lab) -> None:
    import urllib.request

    for k in kernels(lab, TOKEN):
        req = urllib.request.Request(f"{lab}/api/kernels/{k['id']}?token={TOKEN}", method="DELETE")
        urllib.request.urlopen(req).close()


@pytest.fixture(scope="module")
def lab_saved(lab, browser):
    """explore.ipynb run in JupyterLab and saved there with its widget state, kernel shut down."""
    pg = watched_page(browser, 1400, 1100, 60_000)
    open_notebook(pg, lab, "explore.ipynb")
    run_all(pg)
    pg.locator(".tvz-explorer .tvz-cv-scroll canvas").wait_for(state="visible")
    pg.wait_for_selector(".jp-StatusBar-Widget:has-text('Idle')")
    live = _settle(pg, ["canvas"])
    pg.screenshot(path=str(SHOTS / "routes_lab_live.png"))
    pg.keyboard.press("Control+s")
    pg.wait_for_function("() => !document.querySelector('.jp-mod-dirty')")
    pg.close()
    _shut_down_kernels(lab)
    import nbformat

    return live, nbformat.read(lab.root / "explore.ipynb", as_version=4)


def test_lab_live_shows_the_canvas_and_hides_the_stand_in(lab_saved):
    live, nb = lab_saved
    assert live == ["canvas"]
    stand_in, result = nb["cells"][1]["outputs"]
    assert set(stand_in["data"]) == {"image/png", "text/plain"} and VIEW in result["data"]


def test_lab_saved_with_widget_state_shows_one_picture(lab, page, lab_saved):
    """Reopened with the kernel gone, Lab rebuilds the explorer from the saved widget state: its
    canvas draws from the saved payload, and its rule hides the stand-in."""
    _, nb = lab_saved
    model_id = nb["cells"][1]["outputs"][1]["data"][VIEW]["model_id"]
    assert model_id in nb["metadata"]["widgets"][STATE]["state"]  # Lab really saved the state
    _open_saved(lab, page, "explore.ipynb")
    seen = _settle(page, ["canvas"])
    page.screenshot(path=str(SHOTS / "routes_lab_saved_widget_state.png"))
    assert seen == ["canvas"]


def _executed(tmp_path: Path, store_state: bool) -> Path:
    """``jupyter nbconvert --to html --execute`` on the tiny notebook, as docs builds run it."""
    src = _write(tmp_path, "explore.ipynb", [TINY])
    env = isolated_env(tmp_path / "side")
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--execute", str(src)]
    if not store_state:
        cmd.append("--ExecutePreprocessor.store_widget_state=False")
    subprocess.run(cmd, check=True, env=env, cwd=tmp_path, capture_output=True, timeout=300)
    return tmp_path / "explore.html"


def _open_offline(page, path: Path) -> list[str]:
    """``path`` from file:// with every other request refused (no CDN: as offline)."""
    blocked: list[str] = []
    page.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith("file:")
            else (blocked.append(route.request.url), route.abort())
        ),
    )
    page.goto(path.as_uri())
    page.wait_for_function("() => [...document.images].every(i => i.complete)")
    return blocked


def _data_images(html_text: str) -> list[str]:
    return re.findall(r'<img[^>]*src="data:image/png;base64,([^"]+)"', html_text)


@pytest.mark.parametrize("store_state", [True, False], ids=["widget-state", "no-widget-state"])
def test_nbconvert_execute_shows_the_picture_once(page, tmp_path, store_state):
    html_path = _executed(tmp_path, store_state)
    text = html_path.read_text(encoding="utf-8")
    assert (STATE in text) is store_state  # nbclient stores the state by default
    images = _data_images(text)
    assert len(images) == 1 and MARK_PREFIX in images[0]  # the stand-in, once, as a real <img>
    blocked = _open_offline(page, html_path)
    page.screenshot(
        path=str(SHOTS / f"routes_nbconvert_execute_{'state' if store_state else 'nostate'}.png"), full_page=True
    )
    assert pictures(page) == ["stand-in"]
    assert all(not u.startswith("file:") for u in blocked)


def test_nbconvert_of_the_lab_saved_notebook_shows_the_picture_once(page, tmp_path, lab_saved):
    from nbconvert import HTMLExporter

    _, nb = lab_saved
    for sanitize in (False, True):
        body, _ = HTMLExporter(sanitize_html=sanitize).from_notebook_node(nb)
        assert len(_data_images(body)) == 1, sanitize
        path = tmp_path / f"saved_{sanitize}.html"
        path.write_text(body, encoding="utf-8")
        page.unroute("**/*")
        _open_offline(page, path)
        assert pictures(page) == ["stand-in"], sanitize
    page.screenshot(path=str(SHOTS / "routes_nbconvert_lab_saved.png"), full_page=True)


@pytest.fixture(scope="module")
def executed_without_state(lab):
    """The notebook executed headlessly and saved without widget state (JupyterLab's default)."""
    import nbclient
    import nbformat

    nb = nbformat.read(lab.root / "explore.ipynb", as_version=4)
    nb.metadata.pop("widgets", None)
    nbclient.NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(lab.root)}},
    ).execute()
    return nb


def test_untrusted_saved_notebook_shows_the_stand_in_once(lab, page, executed_without_state):
    """Untrusted (as cloned from git): Lab does not render the widget view (its text/plain shows);
    the stand-in is an image output, which Lab draws for untrusted notebooks too."""
    import nbformat

    nbformat.write(executed_without_state, lab.root / "untrusted.ipynb")
    _open_saved(lab, page, "untrusted.ipynb")
    seen = _settle(page, ["stand-in"])
    page.screenshot(path=str(SHOTS / "routes_lab_untrusted.png"))
    assert seen == ["stand-in"]
    assert "tensorviz explorer (TinyLM)" in page.locator(".jp-Notebook").inner_text()


def test_trusted_saved_notebook_without_kernel_or_state_shows_the_stand_in_once(lab, page, executed_without_state):
    import nbformat
    from nbformat.sign import NotebookNotary
    from playwright.sync_api import expect

    nb = nbformat.from_dict(executed_without_state)
    NotebookNotary(data_dir=str(lab.data_dir)).sign(nb)  # the server's own signature store
    nbformat.write(nb, lab.root / "trusted.ipynb")
    _open_saved(lab, page, "trusted.ipynb")
    expect(page.locator(".jp-Notebook")).to_contain_text("Error displaying widget", timeout=30_000)
    seen = _settle(page, ["stand-in"])
    page.screenshot(path=str(SHOTS / "routes_lab_trusted_no_kernel.png"))
    assert seen == ["stand-in"]
