"""The diagram canvas's Python side: the Diagram as binary columns, relations to the selection,
and the explorer's selection synced both ways (driven in-process through traits)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.helpers.geometry_node import run_geometry

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.canvas import DiagramCanvas, esm_source  # noqa: E402
from tensorviz.explorer.payload import FLAGS, RELATIONS, payload, relations, simplify  # noqa: E402
from tensorviz.explorer.render import ALL_LANES  # noqa: E402
from tensorviz.explorer.widget import explore  # noqa: E402
from tensorviz.plan.diagram import PALETTE  # noqa: E402


def col(p: dict, key: str, dtype: str) -> list:
    return np.frombuffer(p[key], dtype).tolist()


def text(p: dict, key: str) -> list[str]:
    return p[key].decode("utf-8").split("\n")


@pytest.fixture
def strided():
    x = torch.zeros(4, 6)  # 96 bytes
    return {"x": x, "row": x[1], "col": x[:, 1], "t": x.t(), "half": torch.zeros(8)[:4]}


def test_payload_columns_are_the_plan(strided):
    lay = tv.analyze(strided)
    d = tv.diagram(lay, max_lanes=ALL_LANES)
    p = payload(d, lay)
    assert text(p, "names") == ["x", "row", "col", "t", "half"] and col(p, "name_prefix", "u1") == [0] * 5
    assert col(p, "bar_start", "<f8") == [b.start for b in d.bars] == [0, 24, 4, 0, 0]
    assert col(p, "bar_stop", "<f8") == [b.stop for b in d.bars] == [96, 48, 80, 96, 16]
    assert [b.lane for b in d.bars] == [1, 2, 3, 4, 6] and p["bar_lane"] == b""  # one per view lane: implied
    assert [p["colors"][i] for i in col(p, "bar_color", "u1")] == [b.color for b in d.bars]
    assert [b.color for b in d.bars] == [PALETTE[k] for k in (0, 1, 2, 0, 3)]  # x and t: one span, one colour
    assert p["bar_view"] == b"" and p["tie_first"] == b""  # bar i draws view i, no ties
    assert text(p, "geom_heads") == ["4, 6;", "6;", "4;6", "6, 4;1, 6", "4;"]  # stride only when not row-major
    assert list(p["geom"]) == [0, 0, 1, 6, 2, 1, 3, 0, 4, 0]  # (head, offset) per view, each one varint byte
    assert p["dtypes"] == ["float32"] and col(p, "dtype", "u1") == [0] * 5
    flags = col(p, "bar_flags", "u1")
    sparse, overlaps, noncontig = (1 << FLAGS.index(f) for f in ("sparse", "overlaps_other", "non_contiguous"))
    assert [bool(f & sparse) for f in flags] == [False, False, True, False, False]
    assert [bool(f & overlaps) for f in flags] == [True, True, True, True, False]
    assert [bool(f & noncontig) for f in flags] == [False, False, True, True, False]
    # col reads 4 of the 19 elements of its span [4, 80): 16 B of 76
    assert col(p, "pct_bar", "<u4") == [2] and np.frombuffer(p["pct"], "<f4")[0] == pytest.approx(16 / 76)
    assert col(p, "run_bar", "<u4") == [2] * 4
    assert np.frombuffer(p["runs"], "<f8").reshape(-1, 2).tolist() == [[4, 8], [28, 32], [52, 56], [76, 80]]
    kinds = col(p, "lane_kind", "u1")
    assert kinds == [0, 1, 1, 1, 1, 0, 1]  # storage x: 4 views; storage half: partial, drawn
    assert text(p, "lane_labels") == [""] * 7 and text(p, "block_tag") == ["", ""]  # cpu: no tag
    assert col(p, "block_nbytes", "<f8") == [96, 32] and col(p, "block_storage", "<i4") == [0, 1]
    assert p["special_lane"] == b""  # no "more" or summary rows
    # marks: bytes read by >= 2 bars on storage #0's lane, the unread half of storage #1
    marks = list(zip(col(p, "mark_kind", "u1"), col(p, "mark_lane", "<u4"), col(p, "mark_start", "<f8")))
    assert (1, 0, 0.0) in marks and (0, 5, 16.0) in marks
    assert p["x_range"] == [0.0, 96.0]


def test_the_canvas_frames_every_binary_column_into_one_buffer(strided, tmp_path):
    """One payload trait: the binary columns framed in COLUMNS order (split again in Python and, by
    geometry.js unframe, in node), the rest as JSON."""
    from tensorviz.explorer.payload import COLUMNS
    from tensorviz.explorer.wire import frame

    lay = tv.analyze(strided)
    d = tv.diagram(lay, max_lanes=ALL_LANES, overview=True)
    p = payload(d, lay)
    assert {k for k, v in p.items() if isinstance(v, bytes)} == set(COLUMNS)
    c = DiagramCanvas()
    c.show(d, lay, caption="5 of 5 tensors shown")
    assert c.columns == {k: p[k] for k in COLUMNS}
    assert c.payload == {k: v for k, v in p.items() if k not in COLUMNS} | {
        "frame": frame(p, COLUMNS), "caption": "5 of 5 tensors shown", "revision": 1,
    }  # fmt: skip
    out = run_geometry(
        tmp_path,
        f"const f = new Uint8Array([7, ...{json.dumps(list(c.payload['frame']))}]);\n"  # at an odd offset
        f"const cols = g.unframe(new DataView(f.buffer, 1), {json.dumps(list(COLUMNS))});\n"
        "console.log(JSON.stringify(Object.fromEntries(Object.entries(cols).map(([k, v]) =>"
        " [k, Array.from(new Uint8Array(v.buffer, v.byteOffset, v.byteLength))]))));\n",
    )
    assert out == {k: list(p[k]) for k in COLUMNS}


def test_names_are_front_coded_and_summary_rows_sized():
    x = torch.zeros(8)
    sd = {"model.layers.0.q": x, "model.layers.0.k": x[:4], "model.layers.1.q": torch.zeros(2)}
    sd["solo"] = torch.zeros(3)
    lay = tv.analyze(sd)
    d = tv.diagram(lay, max_lanes=ALL_LANES)
    p = payload(d, lay)
    assert text(p, "names") == ["model.layers.0.q", "k"] and col(p, "name_prefix", "u1") == [0, 15]
    assert p["name_suffix"] == b""  # no name ends as the one before it
    c = DiagramCanvas()
    c.show(d, lay)
    assert c.drawn_names == ["model.layers.0.q", "model.layers.0.k"]
    assert col(p, "lane_kind", "u1") == [0, 1, 1, 5] and col(p, "special_lane", "<u4") == [3]
    assert p["bar_lane"] == b""
    assert col(p, "special_size", "<f8") == [8 + 12]  # the two simple storages folded


def test_names_share_prefixes_and_suffixes_with_the_previous_one():
    w = torch.zeros(4)
    sd = {f"model.layers.{i}.self_attn.{p}_proj.weight": w[i : i + 1] for i in range(2) for p in "qk"}
    lay = tv.analyze(sd)
    p = payload(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    assert text(p, "names") == ["model.layers.0.self_attn.q_proj.weight", "k", "1.self_attn.q", "k"]
    assert col(p, "name_prefix", "u1") == [0, 25, 13, 25] and col(p, "name_suffix", "u1") == [0, 12, 12, 12]
    c = DiagramCanvas()
    c.show(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    assert c.drawn_names == list(sd)


def test_span_groups_send_their_tied_names():
    w = torch.zeros(4, 4)
    lay = tv.analyze({"wte": w, "head": w, "other": w[1]})
    p = payload(tv.diagram(lay, by="span", max_lanes=ALL_LANES), lay)
    assert text(p, "names") == ["wte", "head", "other"]
    assert col(p, "bar_view", "<u4") == [0, 2]  # bar 1 draws view 2
    assert col(p, "tie_first", "<u4") == [0, 1, 1] and col(p, "ties", "<u4") == [1]
    x = torch.zeros(16)
    lay = tv.analyze({"x": x, "a": x[:4], "b": x[8:12]})
    p = payload(tv.diagram(lay, by="overlap", max_lanes=ALL_LANES), lay)
    assert col(p, "bar_lane", "<u4") == [1, 2, 2]  # a and b packed on one row: lanes sent


def test_partner_hidden_when_the_filter_drops_the_other_reader(strided):
    lay = tv.analyze(strided)
    hidden = 1 << FLAGS.index("partner_hidden")
    p = payload(tv.diagram(lay, names="^row$", max_lanes=ALL_LANES), lay)
    assert text(p, "names") == ["row"] and col(p, "bar_flags", "u1")[0] & hidden
    p = payload(tv.diagram(lay, names="^(row|x)$", max_lanes=ALL_LANES), lay)
    # row's shared bytes are all read by x too; x shares its other bytes with t, filtered out
    assert [f & hidden for f in col(p, "bar_flags", "u1")] == [hidden, 0]


def test_relations_match_layout_relation(strided):
    lay = tv.analyze(strided)
    names = [v.name for v in lay.views]
    for sel in names:
        code, to = relations(lay, names, [sel])
        want = ["selected" if n == sel else lay.relation(n, sel) for n in names]
        got = [RELATIONS[c] if c else "unrelated" for c in code]
        assert got == want, sel
        assert all(names[t] == sel for t, c in zip(to, code) if c)


def test_relations_to_several_selected_keep_the_closest():
    x = torch.zeros(16)
    lay = tv.analyze({"x": x, "a": x[:8], "b": x[8:], "a2": x[2:4]})
    code, to = relations(lay, ["x", "a", "b", "a2"], ["a", "b"])
    assert [RELATIONS[c] for c in code] == ["contains", "selected", "selected", "within"]
    assert to.tolist() == [1, 1, 2, 1]  # x contains a (the first selected of equal rank)
    assert relations(lay, ["x"], ["not-drawn"])[0].tolist() == [0]


def test_simplify_bounds_the_runs_and_covers_them():
    runs = np.array([[i * 10, i * 10 + 3] for i in range(1000)])
    out = simplify(runs, 64)
    assert len(out) <= 65 and out[0, 0] == 0 and out[-1, 1] == 9993
    starts = np.searchsorted(out[:, 0], runs[:, 0], side="right") - 1
    assert (out[starts, 1] >= runs[:, 1]).all()  # every run lies inside a merged one
    assert simplify(runs[:5], 64) is not None and simplify(runs[:5], 64).tolist() == runs[:5].tolist()


def test_esm_ships_the_files_as_modules_with_their_imports(tmp_path):
    """canvas.js keeps its import lines, each pointing at a data URL of the file it names (itself
    linked the same way): the files as they are on disk, one URL (one instance) per file, and a
    module node (and the browser) imports with nothing to build."""
    import base64
    import re
    import shutil
    import subprocess

    from tensorviz.explorer.modules import HERE

    data = re.compile(r'"data:text/javascript;base64,([^"]+)"')
    seen: dict[str, str] = {}

    def unlinked(src: str) -> str:
        """``src`` with each data URL back to the relative import of the file it holds."""

        def back(m: re.Match) -> str:
            inner = unlinked(base64.b64decode(m[1]).decode())
            name = next(f.name for f in HERE.glob("*.js") if f.read_text(encoding="utf-8") == inner)
            assert seen.setdefault(name, m[1]) == m[1]  # one URL per file: one module instance
            return f'"./{name}"'

        return data.sub(back, src)

    src = esm_source()
    assert "./geometry.js" not in src and "./overview.js" not in src
    assert unlinked(src) == (HERE / "canvas.js").read_text(encoding="utf-8")
    assert sorted(seen) == ["compare.js", "geometry.js", "loadmarks.js", "overview.js", "theme.js", "treemap.js"]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the linked module cannot be imported here")
    (tmp_path / "esm.mjs").write_text(src, encoding="utf-8")
    probe = "const m = await import(process.argv[1]); console.log(typeof m.default.render, typeof m.decodeAll);"
    out = subprocess.run([node, "--input-type=module", "-e", probe, (tmp_path / "esm.mjs").as_uri()],
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    assert out.split() == ["function", "function"]


def test_the_browser_reads_flags_and_kinds_by_the_names_python_sends(tmp_path):
    """One table (payload.VOCAB, the canvas's constant ``vocab`` trait): geometry.js turns it into
    bit masks and kind numbers, and every name the JavaScript asks for is in it."""
    import re

    from tensorviz.explorer.modules import HERE
    from tensorviz.explorer.payload import LANE_KINDS, MARK_KINDS, VOCAB

    assert DiagramCanvas().vocab == VOCAB
    out = run_geometry(tmp_path, f"console.log(JSON.stringify(g.vocabCodes({json.dumps(VOCAB)})));\n")
    assert out["flag"] == {name: 1 << k for k, name in enumerate(FLAGS)}
    assert out["lane"] == {name: k for k, name in enumerate(LANE_KINDS)}
    assert out["mark"] == {name: k for k, name in enumerate(MARK_KINDS)}
    assert out["rel"] == {name: k for k, name in enumerate(RELATIONS)}
    js = "".join((HERE / f).read_text(encoding="utf-8") for f in ("canvas.js", "geometry.js", "overview.js"))
    used = {
        (t, n) for t, a, b in re.findall(r"\bC\.(flag|lane|mark|rel)(?:\.(\w+)|\[\"([\w-]+)\"\])", js) for n in [a or b]
    }
    used |= {("flag", n) for n in re.findall(r"\bF\.(\w+)", js)}
    table = {"flag": FLAGS, "lane": LANE_KINDS, "mark": MARK_KINDS, "rel": RELATIONS}
    assert used and all(n in table[t] for t, n in used), sorted((t, n) for t, n in used if n not in table[t])
    assert not re.search(r"flags\[\w+\] & \d|flags & \d|Kind\[l\] === \d", js)  # no bare bits or kind numbers


def test_payload_bytes_per_bar_with_short_names():
    flat = torch.zeros(4 * 5000)
    views = {"flat": flat, **{f"v{i}": flat[4 * i : 4 * i + 4] for i in range(5000)}}
    lay = tv.analyze(views)
    c = DiagramCanvas()
    sent = c.show(tv.diagram(lay, max_lanes=ALL_LANES), lay)
    assert sent / 5001 <= 64, sent / 5001
    assert c.revision == 1 and len(c.drawn_names) == 5001


# -- the explorer's selection -----------------------------------------------------------------------
def test_selected_syncs_list_canvas_and_details(strided):
    ex = explore(strided, snapshot=False)
    ex.selected = ["row"]
    assert ex.tensor_list.value == ("row",) and ex.canvas.selected == ["row"]
    assert "<b>row</b>" in ex.details.value
    code = np.frombuffer(ex.canvas.relations["code"], "u1")
    assert [RELATIONS[c] for c in code] == ["contains", "selected", "overlaps", "contains", ""]
    ex.canvas.selected = ["col", "t"]  # as a shift-click in the browser does
    assert ex.selected == ["col", "t"] and ex.tensor_list.value == ("col", "t")
    ex.tensor_list.value = ("x",)
    assert ex.selected == ["x"] and ex.canvas.selected == ["x"]
    ex.name_filter.value = "^(row|col)$"  # x leaves the picture: the selection drops it
    assert ex.selected == [] and ex.canvas.selected == [] and ex.canvas.drawn_names == ["row", "col"]


def test_a_browser_click_on_a_view_no_longer_drawn_is_dropped(strided):
    """A click sent before Python's redraw reached the browser names a view the filter has since
    left out: the message keeps the names still drawn (from Python the same name raises)."""
    ex = explore(strided, snapshot=False)
    ex.name_filter.value = "^(row|col)$"
    ex.canvas.set_state({"selected": ["x", "col"]})  # as ipywidgets applies a message from the browser
    assert ex.selected == ["col"] and ex.tensor_list.value == ("col",) and "<b>col</b>" in ex.details.value
    with pytest.raises(Exception, match=r"'x' is not in the picture now \(grouped by storage, names matching"):
        ex.selected = ["x"]


def test_selecting_a_name_not_drawn_says_why(strided):
    ex = explore(strided, names="^row$", snapshot=False)
    with pytest.raises(Exception, match=r"'col' is not in the picture now .*clear the name filter"):
        ex.selected = ["col"]
    with pytest.raises(KeyError, match="nope"):
        ex.selected = ["nope"]
    assert ex.selected == []


def test_controls_that_change_nothing_are_disabled_and_say_why():
    ex = explore({"a": torch.zeros(4), "b": torch.zeros(8)}, snapshot=False)
    assert ex.only_shared_box.disabled and ex.unreferenced_box.disabled and ex.expand_box.disabled
    assert "no storage is shared" in ex.inert_hint.value and "no unreferenced bytes" in ex.inert_hint.value
    x = torch.zeros(8)
    ex = explore({"x": x, "h": x[:4], "solo": torch.zeros(2)}, snapshot=False)
    assert not ex.only_shared_box.disabled and not ex.expand_box.disabled
    assert ex.canvas.caption == "2 of 3 tensors shown (+ 1 simple storage, 8 B, folded into one row)"


def test_python_and_the_browser_write_bytes_alike(tmp_path):
    from tensorviz.explorer.payload import VOCAB
    from tensorviz.explorer.text import byte_text

    values = [0, 1, 1023, 1024, 1536, 4000, 16000, 15.625 * 1024, 1048000, 3 << 30, 140.5 * 2**30, 2**41, 1e15]
    units = json.dumps(VOCAB["units"])  # the browser's only unit table: core/units.py's, sent in the vocab
    out = run_geometry(tmp_path, f"g.setUnits({units}); console.log(JSON.stringify({values}.map(g.formatBytes)));\n")
    assert out == [byte_text(v) for v in values]


def test_the_list_is_capped_but_every_drawn_name_is_selectable(monkeypatch):
    from tensorviz.explorer import controls

    monkeypatch.setattr(controls, "LIST_CAP", 3)
    x = torch.zeros(40)
    ex = explore({f"v{i}": x[4 * i : 4 * i + 4] for i in range(10)}, snapshot=False)
    assert ex.tensor_list.options == ("v0", "v1", "v2") and len(ex.canvas.drawn_names) == 10
    assert "first 3 of 10 listed" in ex.list_note.value
    ex.canvas.selected = ["v9"]  # a click on a bar past the list's end
    assert ex.selected == ["v9"] and ex.tensor_list.options == ("v0", "v1", "v2", "v9")
    assert ex.tensor_list.value == ("v9",) and "<b>v9</b>" in ex.details.value


def test_a_name_filter_draws_every_match_never_a_silent_cap():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=48, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=256,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg)
    ex = explore(model, names="self_attn", snapshot=False)
    want = [f"model.layers.{i}.self_attn.{p}_proj.weight" for i in range(48) for p in "qkvo"]
    assert sorted(ex.canvas.drawn_names) == sorted(want)  # 192 bars: k and v included
    assert ex.canvas.caption.startswith("192 of ")


def test_storage_rows_carry_a_device_tag_and_simple_rows_none():
    x = torch.zeros(8, device="meta")
    lay = tv.analyze({"x": x, "h": x[:4], "solo": torch.zeros(2, device="meta")})
    p = payload(tv.diagram(lay, expand_simple=True, max_lanes=ALL_LANES), lay)
    assert col(p, "lane_kind", "u1") == [0, 1, 1, 2]  # storage, views, then the simple storage's one row
    assert text(p, "block_tag") == ["meta"] and col(p, "block_nbytes", "<f8") == [32]


def test_hot_reload_relinks_the_module_for_live_canvases(monkeypatch):
    """With anywidget's ANYWIDGET_HMR=1, a change to a .js file beside the canvas re-links the module
    and sets ``_esm`` on each live canvas (watchfiles' ``watch`` stood in by one change event)."""
    import sys
    import threading
    import types
    import weakref

    from tensorviz.explorer import modules

    changed, seen = threading.Event(), []

    def watch(path, watch_filter):
        seen.append((watch_filter(None, str(path / "geometry.js")), watch_filter(None, str(path / "canvas.py"))))
        changed.wait(30)
        yield {("modified", str(path / "geometry.js"))}

    monkeypatch.setitem(sys.modules, "watchfiles", types.SimpleNamespace(watch=watch))
    monkeypatch.setenv("ANYWIDGET_HMR", "1")
    monkeypatch.setattr(modules, "_WATCHER", [])
    monkeypatch.setattr(modules, "_LIVE", weakref.WeakSet())
    c = DiagramCanvas()
    assert c._esm == esm_source() and len(modules._WATCHER) == 1
    monkeypatch.setattr(modules, "linked", lambda entry: f"// {entry}, linked again")
    changed.set()
    modules._WATCHER[0].join(30)
    assert seen == [(True, False)] and c._esm == "// canvas.js, linked again"
    monkeypatch.delenv("ANYWIDGET_HMR")
    DiagramCanvas()  # hot reload off (anywidget's default): no watcher started
    assert len(modules._WATCHER) == 1


def test_bars_drawn_per_cell_send_their_cell_and_the_hover_says_so(tmp_path):
    """A footprint of more runs than a bar can show is drawn per cell (``Bar.cell``): the payload
    sends each such bar's cell size, and the browser, decoding that payload, says "per 8 KiB
    cell" in the bar's hover, as the static picture's legend does ("bytes read (per 8 KiB cell)")."""
    import base64

    from tensorviz.explorer.modules import HERE
    from tensorviz.explorer.payload import VOCAB
    from tensorviz.plan import bars as plan_bars

    n = 1 << 24  # the rows case of bench_draw_towers.py, on meta: nothing allocated
    x = torch.empty(4, n, dtype=torch.uint8, device="meta")
    lay = tv.analyze({"a": x[:, : n // 2 : 2], "b": x[:, 1 : n // 2 : 2], "row": x[3]})
    d = tv.diagram(lay)
    cell = 4 * n // plan_bars.DRAW_CELLS
    assert cell == 8192 and [(b.names, b.cell) for b in d.bars] == [(("a",), cell), (("b",), cell), (("row",), 0)]
    p = payload(d, lay)
    assert col(p, "cell_bar", "<u4") == [0, 1] and np.frombuffer(p["cell"], "<f8").tolist() == [8192.0, 8192.0]
    binary = {k: base64.b64encode(v).decode() for k, v in p.items() if isinstance(v, bytes)}
    plain = {k: v for k, v in p.items() if not isinstance(v, bytes)}
    out = run_geometry(
        tmp_path,
        f"import {{ decodeAll }} from {json.dumps((HERE / 'canvas.js').as_uri())};\n"
        f"g.setUnits({json.dumps(VOCAB['units'])});\n"
        f"const p = {json.dumps(plain)};\n"
        f"for (const [k, b] of Object.entries({json.dumps(binary)})) p[k] = new DataView(Uint8Array.from(Buffer.from(b, 'base64')).buffer);\n"
        f"const d = decodeAll(p, g.vocabCodes({json.dumps(VOCAB)}));\n"
        "console.log(JSON.stringify([0, 1, 2].map((i) => g.tooltip(d, i))));\n",
    )
    said = "bytes read drawn per 8 KiB cell: a cell is solid when it holds one (the % is exact)"
    assert [said in lines for lines in out] == [True, True, False]
    pct = 100 * d.bars[0].read_nbytes / (d.bars[0].stop - d.bars[0].start)
    assert out[0][out[0].index(said) - 1] == f"footprint {pct:.4g}% of its span (strided, with gaps)"


def test_python_and_the_browser_write_exact_bytes_alike(tmp_path):
    from tensorviz.core.units import exact_bytes
    from tensorviz.explorer.payload import VOCAB

    values = [1, 11, 1000, 1023, 1024, 1536, 8192, 8200, 3584 * 1024, 1 << 30, 3 << 40, 1234567]
    units = json.dumps(VOCAB["units"])
    out = run_geometry(tmp_path, f"g.setUnits({units}); console.log(JSON.stringify({values}.map(g.exactBytes)));\n")
    assert out == [exact_bytes(v) for v in values]
