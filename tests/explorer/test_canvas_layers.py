"""What the matplotlib PNG draws from a Diagram that the browser canvas must draw too: the bytes
views address past a freed storage's end, and the overview of every storage (its binary columns,
decoded here as the browser does, against the plan's own columns)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.helpers.geometry_node import run_geometry

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.payload import payload  # noqa: E402
from tensorviz.explorer.render import ALL_LANES  # noqa: E402
from tensorviz.render.mpl import drawn_rects, render  # noqa: E402


def col(p: dict, key: str, dtype: str) -> list:
    return np.frombuffer(p[key], dtype).tolist()


class Tensors(dict):
    """A dict whose repr reads no tensor data (a freed tensor's values cannot be printed)."""

    def __repr__(self) -> str:
        return f"Tensors({list(self)})"


@pytest.fixture
def freed():
    w = torch.zeros(4, 5)  # 80 bytes
    v = w[1:3]  # bytes [20, 60)
    w.untyped_storage().resize_(0)
    return Tensors(w=w, v=v, other=torch.ones(8))


def test_past_end_mark_is_the_png_layer(freed):
    lay = tv.analyze(freed)
    d = tv.diagram(lay, max_lanes=ALL_LANES)
    p = payload(d, lay)
    marks = list(zip(col(p, "mark_kind", "u1"), col(p, "mark_lane", "<u4"), col(p, "mark_start", "<f8"),
                     col(p, "mark_stop", "<f8")))  # fmt: skip
    # storage #0 (lane 0) is freed: views reach [0, 80) past its 0 bytes; w and v share [20, 60)
    assert sorted(marks) == [(1, 0, 20.0, 60.0), (3, 0, 0.0, 80.0)]
    assert col(p, "block_nbytes", "<f8") == [0.0]  # the storage row's size: nothing left
    fig = render(tv.diagram(lay))
    (png,) = drawn_rects(fig, "past-end")
    assert (png[:, 0].min(), png[:, 0].max()) == (0.0, 80.0)  # the PNG draws the same bytes
    fig.clear()


def test_no_past_end_mark_for_live_storages():
    x = torch.zeros(16)
    lay = tv.analyze({"x": x, "a": x[:4], "b": x[8:]})
    p = payload(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    assert 3 not in col(p, "mark_kind", "u1")


# -- the overview ------------------------------------------------------------------------------------
def unvarint(data: bytes) -> list[int]:
    out, v, shift = [], 0, 0
    for b in data:
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            out.append(v)
            v, shift = 0, 0
    return out


@pytest.fixture
def mixed():
    """Storages of every overview kind, one partly unreferenced, one big, one freed."""
    w, qkv, flat = torch.zeros(64, 16), torch.zeros(48, 16), torch.zeros(1000)
    sd = {"wte": w, "head": w, "qkv": qkv, "q": qkv[:16], "k": qkv[16:32]}
    sd.update({"flat.a": flat[:100], "flat.b": flat[500:600]})  # packed, 3,200 of 4,000 B unreferenced
    sd.update({f"solo{i}": torch.zeros(4 + i) for i in range(5)})
    sd["big"] = torch.zeros(10_000)
    return sd


def test_overview_columns_are_the_plan(mixed):
    lay = tv.analyze(mixed)
    d = tv.diagram(lay, max_lanes=ALL_LANES, overview=True)
    ov, p = d.overview, payload(d, lay)
    packed = unvarint(p["ov_cells"])
    assert [c >> 2 for c in packed] == ov.cells.tolist() and [c & 3 for c in packed] == ov.kind.tolist()
    assert unvarint(p["ov_views"]) == ov.views.tolist() and unvarint(p["ov_nbytes"]) == ov.nbytes.tolist()
    assert p["ov_storage"] == b"" and ov.storage.tolist() == list(range(len(lay.storages)))  # every storage
    (e,) = np.flatnonzero(ov.unreferenced).tolist()
    assert unvarint(p["ov_unref"]) == [e, int(ov.unreferenced_cells[e]), 3200]
    assert p["ov_columns"] == ov.columns and len(p["ov_colors"]) == 10
    assert p["ov_labels"].decode().split("\n") == [label.text for label in ov.labels]
    assert col(p, "ov_label_entry", "<u4") == [label.entry for label in ov.labels]
    # names only for the storages the lanes do not draw: the simple ones, folded into the summary row
    folded = [s for s in ov.storage.tolist() if s not in {b.storage for b in d.blocks}]
    assert [lay.storages[s].names[0] for s in folded] == [f"solo{i}" for i in range(5)] + ["big"]
    assert p["ov_names"].decode().split("\n") == ["solo0", "1", "2", "3", "4", "big"]  # front-coded
    assert col(p, "ov_name_prefix", "u1") == [0, 4, 4, 4, 4, 0]


def test_a_filtered_overview_sends_its_storage_indices(mixed):
    lay = tv.analyze(mixed)
    d = tv.diagram(lay, names="solo|big", max_lanes=ALL_LANES, overview=True)
    p = payload(d, lay)
    deltas = unvarint(p["ov_storage"])
    assert np.cumsum(deltas).tolist() == d.overview.storage.tolist() == [3, 4, 5, 6, 7, 8]


def test_the_browser_draws_the_pngs_cells(mixed, tmp_path):
    """geometry.js decodes the columns and colours every cell as render/mpl/overview.py does."""
    from tensorviz.plan.overview import KINDS
    from tensorviz.render.mpl.overview import cell_codes, grid_shape

    lay = tv.analyze(mixed)
    d = tv.diagram(lay, max_lanes=ALL_LANES, overview=True)
    p = payload(d, lay)
    traits = {k: (list(v) if isinstance(v, bytes) else v) for k, v in p.items() if k.startswith("ov_")}
    widths = (1.5, 10.0)  # inches: narrower than the plan's columns, and wide enough
    shapes = [grid_shape(d.overview, w) for w in widths]  # (columns, rows, pixels a cell)
    rooms = [int((w - 0.6) * 100) for w in widths]  # the PNG's pixels for the grid (0.3 in margins)
    out = run_geometry(
        tmp_path,
        f"const t = {json.dumps(traits)};\n"
        "const get = (k) => (Array.isArray(t[k]) && k !== 'ov_colors' ? new DataView(new Uint8Array(t[k]).buffer) : t[k]);\n"
        f"const ov = g.decodeOverview(get, {json.dumps(list(KINDS))});\n"
        f"console.log(JSON.stringify({{storage: Array.from(ov.storage), unref: Array.from(ov.unrefBytes),"
        f" grids: {json.dumps(rooms)}.map((w) => g.overviewGrid(ov, w)),"
        f" codes: {json.dumps([c for c, _, _ in shapes])}.map((c) => Array.from(g.overviewCodes(ov, c)))}}));\n",
    )
    assert out["storage"] == d.overview.storage.tolist()
    assert out["unref"] == d.overview.unreferenced.tolist()
    assert [(g["cols"], g["rows"], g["px"]) for g in out["grids"]] == shapes
    for (c, _, _), codes in zip(shapes, out["codes"]):
        assert codes == cell_codes(d.overview, c).ravel().tolist(), c
    assert shapes[0][0] < d.overview.columns == shapes[1][0]


def test_payload_with_an_overview_stays_under_64_bytes_a_bar():
    """1,000 layers of a tied pair and a norm: 2,000 bars, 1,000 simple storages folded into the
    summary row (their names are in the overview), 2,000 storages in the overview."""
    from tensorviz.explorer.widget import explore

    sd = {}
    for i in range(1000):
        w = torch.empty(8, 4, device="meta")
        sd.update({f"model.layers.{i}.emb.weight": w, f"model.layers.{i}.head.weight": w})
        sd[f"model.layers.{i}.norm.weight"] = torch.empty(4 + i % 7, device="meta")
    ex = explore(sd, snapshot=False, all_storages=True)
    assert len(ex.diagram.bars) == 2000 and ex.diagram.overview.storage.size == 2000
    assert ex.payload_nbytes / 2000 <= 64, ex.payload_nbytes / 2000
    assert len(unvarint(ex.canvas.columns["ov_cells"])) == 2000


def test_the_explorer_shows_an_overview_where_the_png_would_and_it_tells_storages_apart():
    from tensorviz.explorer.widget import explore

    w = torch.zeros(8)
    mixed = {"w": w, "w_half": w[:4], **{f"w{i}": torch.zeros(4) for i in range(48)}}  # a slice and simple
    many = explore(mixed, snapshot=False, all_storages=True)
    assert many.canvas.payload["ov_columns"] > 0 and len(unvarint(many.canvas.columns["ov_cells"])) == 49
    # 50 storages of one kind: the overview would be one colour, it tells nothing the lanes do not
    alike = explore({f"w{i}": torch.zeros(4) for i in range(50)}, snapshot=False, all_storages=True)
    assert alike.canvas.payload["ov_columns"] == 0 and alike.diagram.overview is None
    assert alike._renderer.picture(alike.state)[0].overview is not None  # the static picture keeps its own
    few = explore({f"w{i}": torch.zeros(4) for i in range(10)}, snapshot=False)
    assert few.canvas.payload["ov_columns"] == 0 and few.canvas.columns["ov_cells"] == b""
    assert few._renderer.picture(few.state)[0].overview is None


def test_the_browser_decodes_the_names_python_codes(tmp_path):
    """wire.affix_code in Python, geometry.js frontDecode in node: the same names back, with
    non-ASCII characters (never shared: JavaScript counts UTF-16 units), newlines (shown as
    ``\\n``), and middles that are empty."""
    from tensorviz.explorer.wire import affix_code, text

    names = ["model.layers.0.q_proj.weight", "model.layers.0.k_proj.weight", "model.layers.10.k_proj.weight",
             "model.layers.1.k_proj.weight", "é.a", "é.b", "x.é", "y.é", "a😀b.w", "a😀c.w", "aXa", "aa", "a\nb.w",
             "a\nc.w", "", "q"]  # fmt: skip
    prefix, suffix, rest = affix_code(names)
    assert suffix[:4] == [0, 12, 15, 14] and prefix[4:8] == [0, 0, 0, 0] and suffix[6:8] == [0, 0]
    assert rest[3] == ""  # "model.layers.1" + "" + ".k_proj.weight"
    out = run_geometry(
        tmp_path,
        f"const bytes = new Uint8Array({json.dumps(list(text(rest)))});\n"
        f"const rest = g.lines(new DataView(bytes.buffer), {len(rest)});\n"
        f"const out = g.frontDecode(rest, {json.dumps(prefix)}, {json.dumps(suffix)});\n"
        "console.log(JSON.stringify(out));\n",
    )
    assert out == [n.replace("\n", "\\n") for n in names]  # a newline is shown escaped (wire.browser_form)
