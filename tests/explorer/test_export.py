"""tv.export_html / the CLI's --html: one self-contained page of the canvas explorer.

What the page carries is checked against what the live explorer computes: the payload of each
grouping is the canvas's own (same frame), and the precomputed relations of each view are
exactly :func:`tensorviz.explorer.payload.relations` for that view selected. Hostile names stay
data (no element, script end or comment opens). The browser side is tests/browser/test_browser_export.py.
"""

from __future__ import annotations

import base64
import html.parser
import json
import re

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.explorer import wire
from tensorviz.explorer.export import RELATION_LIMIT, _sources, page_html
from tensorviz.explorer.payload import COLUMNS, payload, relations, view_names
from tensorviz.explorer.render import Renderer
from tensorviz.explorer.state import ExplorerState, normalise
from tests.helpers.models import FusedQKV, TiedLM, llama_70b_on_meta

HOSTILE = [
    "</script><img src=x onerror=alert(1)>",
    "<!--<script>",
    "a&amp;b\u2028c",
    "sur\ud800",
    "\"quoted\" 'single'",
]


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="tvz-data">(.*?)</script>', page, re.S)
    return json.loads(m[1])


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict]]:
    p = _Tags()
    p.feed(page)
    return p.tags


def test_each_grouping_carries_the_canvas_payload(tmp_path):
    model = FusedQKV()
    layout = tv.analyze(model)
    data = _data(tv.export_html(model, tmp_path / "p.html", by="span").read_text("utf-8"))
    assert data["first"] == "span" and set(data["views"]) == {"storage", "span", "overlap"}
    for by, view in data["views"].items():
        state = normalise(ExplorerState(by=by, all_storages=True), layout)
        d = Renderer(layout, dpi=100, max_lanes=40, width=None).get(state)[0].diagram
        want = payload(d, layout)
        sent = view["payload"]
        assert base64.b64decode(sent["frame"]) == wire.frame(want, COLUMNS)  # byte for byte the canvas's
        assert {k: v for k, v in sent.items() if k not in ("frame", "caption", "revision")} == json.loads(
            json.dumps({k: v for k, v in want.items() if k not in COLUMNS})
        )
        assert view["names"] == view_names(d)
    assert (
        data["views"]["span"]["payload"]["caption"]
        == "3 of 6 tensors shown (+ 3 simple storages, 200 B, folded into one row)"
    )


def _decoded(view: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = view["relations"]
    col = lambda k, dt: np.frombuffer(base64.b64decode(r[k]), dtype=dt)  # noqa: E731
    return col("first", "<u4"), col("to", "<u4"), col("code", "u1")


@pytest.mark.parametrize("make", [FusedQKV, TiedLM, lambda: _strided()], ids=["fused", "tied", "strided"])
def test_page_relations_are_the_explorers_for_every_single_selection(make, tmp_path):
    obj = make()
    layout = tv.analyze(obj)
    data = _data(page_html(layout, ExplorerState()))
    for view in data["views"].values():
        names = view["names"]
        first, to, code = _decoded(view)
        assert len(first) == len(names) + 1
        for i, name in enumerate(names):
            got = np.zeros(len(names), dtype=np.uint8)
            got[to[first[i] : first[i + 1]]] = code[first[i] : first[i + 1]]
            want, _ = relations(layout, names, [name])
            want[i] = 0  # "selected": the page sets it itself
            got[i] = 0
            assert got.tolist() == want.tolist(), name


def _strided() -> dict[str, torch.Tensor]:
    x = torch.zeros(6, 8)
    return {"x": x, "even": x[:, ::2], "odd": x[:, 1::2], "row": x[1], "t": x.t(), "other": torch.zeros(3)}


def test_hostile_names_stay_data(tmp_path):
    w = torch.zeros(64)
    obj = {f"m.{n}": w[4 * i : 4 * i + 4] for i, n in enumerate(HOSTILE)} | {"m.whole": w}
    out = tv.export_html(obj, tmp_path / "h.html", title="<b>title</b></title><script>")
    page = out.read_text("utf-8")  # a lone surrogate became U+FFFD where it was not escaped: valid UTF-8
    tags = _tags(page)
    n = len(_sources("page.js"))  # page.js, canvas.js and the modules it imports
    assert [t for t, _ in tags if t == "script"] == ["script"] * (n + 2)  # data, the modules, boot: nothing else
    assert not [t for t, _ in tags if t in ("img", "iframe", "object")]
    assert [t for t, _ in tags].count("b") == 1  # the "model map" heading only
    assert "<!--" not in page and "<title>&lt;b&gt;title&lt;/b&gt;&lt;/title&gt;&lt;script&gt;</title>" in page
    data = _data(page)  # the JSON still parses and gives the names back as the browser shows them
    assert data["views"]["storage"]["names"] == [
        wire.browser_form(n)
        for n in view_names(
            Renderer(tv.analyze(obj), dpi=100, max_lanes=40, width=None)
            .get(ExplorerState(all_storages=True))[0]
            .diagram
        )
    ]
    assert "sur\\ud800" in data["views"]["storage"]["names"][3]


def test_the_page_asks_for_nothing_outside_itself(tmp_path):
    page = tv.export_html(TiedLM(), tmp_path / "t.html").read_text("utf-8")
    csp = dict(_tags(page))["meta"] if False else [a for t, a in _tags(page) if a.get("http-equiv")][0]["content"]
    assert csp.startswith("default-src 'none'; script-src 'unsafe-inline' blob:;")
    assert not re.search(r"(?:src|href)\s*=", page.split('<script type="application/json"')[0])
    assert not re.search(r"https?://|//cdn|import\s*\(\s*['\"]http", page)


def test_options_are_checked_and_a_storage_is_found_by_name(tmp_path):
    model = FusedQKV()
    with pytest.raises(ValueError, match="by must be one of"):
        tv.export_html(model, tmp_path / "x.html", by="spans")
    with pytest.raises(
        ValueError, match=r"tv.export_html\(\): byte_range=\(0, 8\) zooms into the bytes of one storage"
    ):
        tv.export_html(model, tmp_path / "x.html", byte_range=(0, 8))
    assert not (tmp_path / "x.html").exists()
    data = _data(tv.export_html(model, tmp_path / "s.html", storage="q.weight", names="qkv|q\\.").read_text())
    assert data["views"]["storage"]["names"] == ["qkv.weight", "q.weight"]


def test_the_70b_sized_meta_model_page_is_under_2_mb(tmp_path):
    llama = llama_70b_on_meta(torch.float32)
    out = tv.export_html(llama, tmp_path / "llama.html")
    assert out.stat().st_size < 2 * 1024 * 1024
    data = _data(out.read_text("utf-8"))
    assert len(data["views"]["storage"]["names"]) == len(tv.analyze(llama)) == 725  # every view drawn


def test_over_the_relation_limit_no_relations_are_sent():
    flat = torch.zeros(RELATION_LIMIT + 2)
    obj = {"flat": flat, **{f"v{i}": flat[i : i + 1] for i in range(RELATION_LIMIT + 1)}}
    page = page_html(tv.analyze(obj), ExplorerState())
    view = _data(page)["views"]["storage"]
    first, to, code = _decoded(view)
    assert len(first) == RELATION_LIMIT + 3 and not first.any() and to.size == code.size == 0
    assert f"over {RELATION_LIMIT:,} views: a click outlines the selection only" in page


def test_cli_html_writes_the_explorer_page(tmp_path):
    from safetensors.torch import save_file

    from tensorviz.cli import main

    path = tmp_path / "m.safetensors"
    save_file({"a.w": torch.zeros(4, 4), "a.b": torch.zeros(4)}, str(path))
    out = tmp_path / "m.html"
    assert main([str(path), "--html", str(out), "--by", "span"]) == 0
    page = out.read_text("utf-8")
    assert _data(page) == _data(page_html(tv.analyze(path), ExplorerState(by="span")))
    assert page.count('<script type="text/x-tvz-module"') == len(_sources("page.js")) >= 4
