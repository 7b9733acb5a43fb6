"""The interactive explain: its pure JavaScript geometry computes the same element → cell mapping
(and strip window, and cell → readers) as Python's plan; the widget's traits and display bundle."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import torch

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.explain_widget import ESM, ExplainWidget, plan_payload  # noqa: E402
from tensorviz.render.explain import explain_plan  # noqa: E402


def run_node(tmp_path, payload: dict) -> list:
    """For each strip of ``payload``: per view the first cells and read cells, the window, and
    per drawn cell its readers, as explain.js computes them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: explain.js cannot be run here")
    script = tmp_path / "explain_run.mjs"
    script.write_text(
        f"import * as x from {json.dumps(ESM.as_uri())};\n"
        f"const plan = {json.dumps(payload)};\n"
        """const out = plan.strips.map((s) => {
  const reads = [...new Set(s.views.flatMap((v) => x.readCells(v, s.cellBytes)))].sort((a, b) => a - b);
  const segments = x.stripWindow(Math.floor(s.nbytes / s.cellBytes), reads, plan.maxCells);
  const cells = segments.flatMap(([a, b]) => Array.from({ length: b - a }, (_, k) => a + k));
  return { first: s.views.map((v) => x.firstCells(v, s.cellBytes)), read: s.views.map((v) => x.readCells(v, s.cellBytes)),
           segments, readers: cells.map((c) => x.readersOf(s.views, s.cellBytes, c).length) };
});
console.log(JSON.stringify(out));
""",
        encoding="utf-8",
    )
    return json.loads(
        subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60, check=True).stdout
    )


def cases():
    base = torch.arange(14.0)
    x = base[2:].view(3, 4)
    s = torch.arange(10.0)
    w = torch.zeros(4096, 4096)
    big = torch.zeros(10_000)
    f = torch.arange(8.0).reshape(2, 4)
    return {
        "slices": ((x, x.t(), x[:, ::2]), None),
        "expand and windows": ((s.expand(4, 10), torch.as_strided(s, (4, 3), (2, 1), 1)), None),
        "corner of a 4096 x 4096 weight": ((w, w.t()), None),
        "a region": ((w,), (slice(100, 102), slice(8, 16, 2))),
        "far apart": ((big[:4], big[-4:]), None),
        "mixed dtypes": ((f[0], f.view(torch.int16)[0]), None),
        "two storages and a scalar": ((torch.zeros(4), torch.tensor(5.0), torch.zeros(2, 3).t()), None),
    }


@pytest.mark.parametrize("case", list(cases()))
def test_javascript_maps_elements_to_cells_as_python_does(case, tmp_path):
    tensors, region = cases()[case]
    plan = explain_plan(*tensors, region=region)
    got = run_node(tmp_path, plan_payload(plan))
    assert len(got) == len(plan.strips)
    for strip, js in zip(plan.strips, got):
        per_view = [(v.addresses.reshape(-1).tolist(), sorted(set(_span(v, strip.cell_bytes)))) for v in strip.views]
        assert [first for first, _ in per_view] == js["first"]
        assert [read for _, read in per_view] == js["read"]
        assert [tuple(s) for s in js["segments"]] == list(strip.segments)
        assert js["readers"] == _readers(strip).tolist()


def _span(v, cell_bytes: int) -> list[int]:
    per = v.itemsize // cell_bytes
    return (v.addresses.reshape(-1)[:, None] + np.arange(per)[None, :]).reshape(-1).tolist()


def _readers(strip) -> np.ndarray:
    """Per drawn cell, how many (view, element) pairs read it: brute force over elements."""
    cells = strip.window()
    out = np.zeros(cells.size, dtype=np.int64)
    for v in strip.views:
        per = v.itemsize // strip.cell_bytes
        for a in v.addresses.reshape(-1).tolist():
            out += (cells >= a) & (cells < a + per)
    return out


def test_interactive_explain_is_a_widget_with_a_static_twin():
    x = torch.arange(12.0).reshape(3, 4)
    w = tv.explain(x, x.t(), names=["x", "x.t()"], interactive=True)
    assert isinstance(w, ExplainWidget)
    (strip,) = w.plan["strips"]
    assert [v["name"] for v in strip["views"]] == ["x", "x.t()"]
    assert strip["views"][1] | {"color": None} == {
        "name": "x.t()",
        "dtype": "float32",
        "shape": [4, 3],
        "stride": [1, 4],
        "offset": 0,
        "itemsize": 4,
        "base": 0,
        "color": None,
        "formula": "addr = 0 + 1·i + 4·j",
        "shown": "",
    }
    data, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["image/png"].startswith("iVBOR") and "text/html" not in data
    assert data["text/plain"] == "x: addr = 0 + 4·i + 1·j\nx.t(): addr = 0 + 1·i + 4·j"
    assert x.stride() == (4, 1)  # nothing changed


def test_names_are_data_in_the_payload():
    names = ["<img src=x onerror=alert(1)>", "bidi\u202eexe.txt", "z" * 20_000]
    w = tv.explain(torch.zeros(3), torch.zeros(2), torch.zeros(1), names=names, interactive=True)
    shown = [s["views"][0]["name"] for s in w.plan["strips"]]
    assert shown[:2] == ["<img src=x onerror=alert(1)>", "bidi\\u202eexe.txt"]  # drawn with fillText
    assert len(shown[2]) <= 121 and shown[2].startswith("zzz")
    assert "textContent" in ESM.read_text() and "innerHTML" not in ESM.read_text()
