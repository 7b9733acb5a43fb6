"""The explorer, driven in-process through its widgets' traits (as a browser click would)."""

from __future__ import annotations

import base64
import gc
import html
import io
import weakref

import numpy as np
import pytest
import torch

pytest.importorskip("ipywidgets")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer import widget as tw  # noqa: E402
from tensorviz.explorer.widget import Explorer, ExplorerState, Snapshot, explore  # noqa: E402
from tests.helpers.models import FusedQKV, QVOnly, TiedLM, meta_model, seed_tensors, tiny_gpt2  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def lanes(ex: Explorer) -> list[tuple[str, str]]:
    return [(lane.kind, lane.label) for lane in ex.diagram.lanes]


def bars(ex: Explorer) -> list[tuple[str, int, int]]:
    return [(bar.label, bar.start, bar.stop) for bar in ex.diagram.bars]


@pytest.fixture
def shown(monkeypatch):
    """What explore()/snapshot() emit as output (IPython's display, captured)."""
    out: list = []
    monkeypatch.setattr(tw, "_display", lambda obj, **kw: out.append(obj) or True)
    return out


# -- pure helpers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n, label",
    [
        (0, "0 B"),
        (1000, "1000 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (1056, "1.031 KiB"),
        (3 << 30, "3 GiB"),
        (5 << 20, "5 MiB"),
        ((5 << 20) + 1, "5 MiB"),  # at most 4 significant digits, as the canvas axis
    ],
)
def test_offset_label(n, label):
    assert tw.offset_label(n) == label


@pytest.mark.parametrize(
    "nbytes, head, tail, count",
    [
        (4000, [0, 16, 32], [3984, 4000], 251),
        (256, [0, 1, 2], [255, 256], 257),
        (1 << 30, [0, 1 << 22], [(1 << 30) - (1 << 22), 1 << 30], 257),
        (0, [0, 1], [0, 1], 2),
    ],
)
def test_zoom_points(nbytes, head, tail, count):
    pts = tw.zoom_points(nbytes)
    assert pts[: len(head)] == head and pts[-2:] == tail and len(pts) == count


def test_span_text_and_pattern_problem():
    assert tw.span_text(4000, 8000) == "[0xfa0, 0x1f40) = [3.906 KiB, 7.813 KiB), 3.906 KiB (4000 B)"
    assert tw.pattern_problem("attn|mlp") is None
    msg = tw.pattern_problem("attn(")
    assert msg.startswith(
        "name filter 'attn(' is not a valid regular expression: missing ), unterminated subpattern at position 4."
    )


def test_state_options_and_normalise():
    lay = tv.analyze(seed_tensors())
    st = ExplorerState(
        by="span", names="a|b", only_shared=True, show_unreferenced=False, storage=0, byte_range=(0, 16000)
    )
    assert tw.normalise(st, lay).byte_range is None  # the whole storage is no zoom
    assert tw.normalise(ExplorerState(byte_range=(4, 8)), lay).byte_range is None  # no storage
    assert tw.normalise(st, lay).diagram_options() == {
        "by": "span",
        "names": "a|b",
        "storages": [0],
        "only_shared": True,
        "byte_range": None,
        "show_unreferenced": False,
        "expand_simple": False,
    }
    with pytest.raises(ValueError, match=r"storage index 3 is out of range: this layout has 1 storage \(0..0\)"):
        tw.normalise(ExplorerState(storage=3), lay)
    with pytest.raises(ValueError, match=r"byte_range \(8, 4\) must satisfy 0 <= lo < hi <= 16000"):
        tw.normalise(ExplorerState(storage=0, byte_range=(8, 4)), lay)


# -- the first state ----------------------------------------------------------------------------
def test_explore_seed_tensors_first_state(shown):
    ex = tv.explore(seed_tensors())
    assert isinstance(ex, Explorer)
    assert lanes(ex) == [("storage", "storage #0 · 15.6 KiB"), ("view", "a"), ("view", "b"), ("view", "c")]
    assert bars(ex) == [("a", 0, 16000), ("b", 4000, 8000), ("c", 8000, 12000)]
    assert ex.png.startswith(PNG)
    assert np.frombuffer(ex.canvas.columns["bar_start"], "<f8").tolist() == [0, 4000, 8000]
    assert np.frombuffer(ex.canvas.columns["bar_stop"], "<f8").tolist() == [16000, 8000, 12000]
    assert ex.canvas.drawn_names == ["a", "b", "c"] and ex.canvas.caption == "3 of 3 tensors shown"
    assert ex.tensor_list.options == ("a", "b", "c")
    assert ex.storage_picker.options == (("all storages", -1), ("#0 a +2 · 15.63 KiB", 0))
    assert ex.status == "grouped by storage · planned in {} ms".format(
        ex.status.split("planned in ")[1].split(" ms")[0]
    )
    assert ex.zoom.layout.display == "none" and ex.zoom_hint.layout.display is None
    assert ex.last_error is None
    # explore() also emitted a static snapshot of this first state, hidden while the widget is live
    assert len(shown) == 1 and isinstance(shown[0], Snapshot)
    assert shown[0].png == ex.png and shown[0].hide_when_live == f"tvz-live-{ex.model_id}"
    assert f"tvz-live-{ex.model_id}" in ex._dom_classes


def test_initial_options_set_the_controls(shown):
    ex = explore(
        FusedQKV(),
        by="overlap",
        names="weight",
        only_shared=True,
        show_unreferenced=False,
        storage="v.weight",
        byte_range=(800, 1600),
    )
    assert (
        ex.by_toggle.value,
        ex.name_filter.value,
        ex.only_shared_box.value,
        ex.unreferenced_box.value,
        ex.storage_picker.value,
        ex.zoom.value,
    ) == ("overlap", "weight", True, False, 0, (800, 1600))
    assert ex.diagram.byte_range == (800, 1600)
    assert bars(ex) == [("qkv.weight", 0, 2400), ("v.weight", 800, 1600)]  # bars in the zoom window
    assert ex.state == ExplorerState("overlap", "weight", True, False, 0, (800, 1600))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"names": "q("}, r"name filter 'q\(' is not a valid regular expression"),
        ({"by": "bytes"}, r"by must be one of 'storage', 'span', 'overlap', got 'bytes'"),
        ({"storage": 9}, r"storage index 9 is out of range: this layout has 4 storages \(0..3\)"),
        ({"storage": 0, "byte_range": (0, 10**6)}, r"must satisfy 0 <= lo < hi <= 2400"),
    ],
)
def test_bad_initial_options_raise_with_the_fix(kwargs, match, shown):
    with pytest.raises(ValueError, match=match):
        explore(FusedQKV(), **kwargs)
    assert shown == []


# -- each control ---------------------------------------------------------------------------------
def test_grouping_toggle(shown):
    ex = explore(TiedLM())
    first, revision = ex.png, ex.canvas.revision
    assert lanes(ex)[:3] == [("storage", "storage #0 · 3.1 KiB"), ("view", "wte.weight"), ("view", "lm_head.weight")]
    ex.by_toggle.value = "span"
    assert ex.diagram.by == "span"
    assert bars(ex) == [("wte.weight ≡ lm_head.weight", 0, 3200)]
    assert lanes(ex) == [
        ("storage", "storage #0 · 3.1 KiB"),
        ("view", "wte.weight ≡ lm_head.weight"),
        ("summary", "2 simple storages, 128 B"),
    ]
    assert ex.png != first and ex.canvas.revision == revision + 1
    assert ex.canvas.drawn_names == ["wte.weight", "lm_head.weight"]
    assert np.frombuffer(ex.canvas.columns["lane_kind"], "u1").tolist() == [0, 1, 5]  # storage, view, summary
    assert np.frombuffer(ex.canvas.columns["tie_first"], "<u4").tolist() == [0, 1]  # the bar's second name
    assert np.frombuffer(ex.canvas.columns["ties"], "<u4").tolist() == [1]
    span_png = ex.png
    ex.by_toggle.value = "overlap"
    assert ex.diagram.by == "overlap" and ex.png not in (first, span_png)
    # seed tensors: b and c do not overlap, so overlap packing puts them on one lane
    ex2 = explore(seed_tensors(), by="overlap")
    assert lanes(ex2) == [("storage", "storage #0 · 15.6 KiB"), ("view", "a"), ("view", "b, c")]


def test_name_filter_and_bad_pattern(shown):
    ex = explore(FusedQKV())
    before = ex.png
    ex.name_filter.value = r"^q\."
    assert [b.names for b in ex.diagram.bars] == [("q.weight",)]
    assert ex.diagram.collapsed.text == "1 simple storage, 40 B"  # q.bias: matched, folded
    assert ex.tensor_list.options == ("q.weight",) and ex.png != before
    good = ex.png
    ex.name_filter.value = "q("
    assert ex.status == (
        "⚠ name filter 'q(' is not a valid regular expression: missing ), unterminated "
        "subpattern at position 1. Fix it (escape brackets as \\( ) or clear the box to "
        "show every tensor; the picture still shows the previous filter."
    )
    assert "tvz-error" in ex.status_line.value
    assert ex.png == good and ex.state.names == r"^q\." and ex.last_error is None
    ex.name_filter.value = ""
    assert ex.tensor_list.options == ("qkv.weight", "q.weight", "v.weight")


def test_only_shared_switch(shown):
    ex = explore(tiny_gpt2())
    # first the storages that matter (the tied one and the 8 largest), drawn one by one
    assert ex.diagram.collapsed is None and len(ex.diagram.blocks) == len(ex.state.key) == 8
    assert ex.all_toggle.description == "show all 28 storages" and ex.focus_row.layout.display is None
    ex.all_toggle.value = True  # the simple ones folded into one row
    assert ex.state.key is None and ex.diagram.collapsed.count == 27
    before = ex.png
    ex.only_shared_box.value = True
    assert ex.diagram.collapsed is None
    assert bars(ex) == [("transformer.wte.weight", 0, 2048), ("lm_head.weight", 0, 2048)]
    assert lanes(ex) == [
        ("storage", "storage #0 · 2.0 KiB"),
        ("view", "transformer.wte.weight"),
        ("view", "lm_head.weight"),
    ]
    assert ex.png != before


def test_unreferenced_switch(shown):
    ex = explore(QVOnly())  # q rows 0-10, v rows 20-30 of a hidden 30x20 weight
    assert ex.diagram.blocks[0].unreferenced.tolist() == [[800, 1600]]
    before = ex.png
    ex.unreferenced_box.value = False
    assert ex.diagram.blocks[0].unreferenced.tolist() == []
    assert ex.diagram.options.show_unreferenced is False and ex.png != before


def test_expand_simple_switch(shown):
    ex = explore(FusedQKV())
    before = ex.png
    ex.expand_box.value = True
    assert ex.diagram.collapsed is None
    assert [lane.label for lane in ex.diagram.lanes if lane.kind == "simple"] == ["qkv.bias", "q.bias", "v.bias"]
    assert ex.png != before


def test_storage_picker_and_zoom(shown):
    ex = explore(FusedQKV())
    whole = ex.png
    ex.storage_picker.value = 1  # qkv.bias alone: a simple storage, drawn in full
    assert [b.storage for b in ex.diagram.blocks] == [1] and bars(ex) == [("qkv.bias", 0, 120)]
    assert ex.zoom.layout.display is None and ex.zoom_hint.layout.display == "none"
    assert ex.zoom.value == (0, 120) and len(ex.zoom.options) == 121
    ex.storage_picker.value = 0
    assert ex.zoom.options[:3] == (("0 B", 0), ("16 B", 16), ("32 B", 32))
    assert ex.zoom.options[-1] == ("2.344 KiB", 2400) and ex.zoom.value == (0, 2400)
    storage_png = ex.png
    assert storage_png != whole
    ex.zoom.value = (1024, 2048)
    assert ex.diagram.byte_range == (1024, 2048) and ex.state.byte_range == (1024, 2048)
    assert [b.names for b in ex.diagram.bars] == [("qkv.weight",), ("v.weight",)]
    assert ex.png not in (whole, storage_png)
    assert "bytes [1 KiB, 2 KiB)" in ex.status
    ex.storage_picker.value = -1  # back to all storages: zoom reset and hidden
    assert ex.state.storage is None and ex.state.byte_range is None and ex.png == whole


def test_zoom_handles_on_one_stop_keep_the_picture(shown):
    """Dragging both handles of the byte range onto one stop is a gesture, not a failure."""
    ex = explore(FusedQKV())
    ex.storage_picker.value = 0
    ex.zoom.value = (1024, 2048)
    before, state = ex.png, ex.state
    ex.zoom.value = (1024, 1024)
    assert ex.last_error is None and ex.png == before and ex.state == state
    assert ex.status == (
        "⚠ the byte range [1 KiB, 1 KiB) is empty: drag the two handles apart; "
        "the picture still shows the previous range."
    )
    ex.zoom.value = (1024, 1040)
    assert ex.diagram.byte_range == (1024, 1040) and ex.last_error is None


def test_empty_storage_has_nothing_to_zoom(shown):
    ex = explore({"w": torch.zeros(4), "nothing": torch.zeros(0)}, expand_simple=True)
    ex.storage_picker.value = 1
    assert ex.zoom.value == (0, 0) and ex.state.byte_range is None and ex.last_error is None
    assert [b.names for b in ex.diagram.bars] == [("nothing",)] and ex.diagram.bars[0].empty


def test_cache_per_state(shown):
    ex = explore(seed_tensors())
    first, misses = ex.png, ex._renderer.misses
    ex.by_toggle.value = "span"
    ex.by_toggle.value = "storage"
    assert ex._renderer.misses == misses + 1 and ex.png == first
    assert ex.status.endswith("· from cache")
    figure = ex._renderer.figure
    ex.by_toggle.value = "overlap"
    assert ex._renderer.figure is figure  # one reused Figure


def test_meta_model(shown):
    ex = explore(meta_model(), by="span")
    assert bars(ex) == [("emb.weight ≡ head.weight", 0, 1280)]
    assert lanes(ex)[0] == ("storage", "storage #0 · meta · 1.2 KiB")
    ex.tensor_list.value = ("head.weight",)
    assert "identical emb.weight" in ex.details.value


# -- details, explain, save check ---------------------------------------------------------------
def test_details_pane_exact(shown):
    ex = explore(seed_tensors())
    assert "Select tensors in the list" in ex.details.value
    ex.tensor_list.value = ("b",)
    assert ex.details.value == (
        '<div class="tvz-details"><div class="tvz-view"><b>b</b><table>'
        "<tr><th>dtype</th><td>float32 (4 B per element)</td></tr>"
        "<tr><th>shape</th><td>(2, 10, 50)</td></tr>"
        "<tr><th>stride</th><td>(500, 50, 1) elements (contiguous)</td></tr>"
        "<tr><th>offset</th><td>1000 elements = 4000 B</td></tr>"
        "<tr><th>span</th><td>[0xfa0, 0x1f40) = [3.906 KiB, 7.813 KiB), 3.906 KiB (4000 B)</td></tr>"
        "<tr><th>footprint</th><td>4000 B read of a 4000 B span: 100% (dense)</td></tr>"
        "<tr><th>storage</th><td>#0 cpu, 15.63 KiB (16000 B), 3 views</td></tr>"
        "<tr><th>relations</th><td>within a; disjoint c</td></tr>"
        "</table></div></div>"
    )


def test_details_strided_view_and_escaping(shown):
    x = torch.arange(24.0).reshape(4, 6)
    ex = explore({"x": x, "<cols & co>": x[:, ::2]})
    ex.tensor_list.value = ("<cols & co>",)
    facts = dict(tw.view_facts(ex.tensor_layout, "<cols & co>"))
    assert facts["stride"] == "(6, 2) elements (non-contiguous)"
    assert facts["span"] == "[0x0, 0x5c) = [0 B, 92 B), 92 B (92 B)"
    assert facts["footprint"] == "48 B read of a 92 B span: 52.17% (strided, with gaps)"
    assert facts["relations"] == "within x"
    assert "<b>&lt;cols &amp; co&gt;</b>" in ex.details.value
    assert "<cols & co>" not in ex.details.value
    page = ex.to_html()
    assert "&lt;cols &amp; co&gt;" in page and "<cols & co>" not in page


def test_relations_are_counted_past_the_first_few():
    w = torch.zeros(40, 4)
    lay = tv.analyze({"w": w, **{f"r{i}": w[i] for i in range(14)}})
    text = tw.relations_text(lay, lay["r0"])
    assert text.startswith("within w; disjoint r1; disjoint r2;")
    assert text.endswith("disjoint r11; … 2 more: disjoint 2")


def test_explain_action(shown):
    x = torch.arange(24.0).reshape(4, 6)
    # 16 rows of every other element, 256 elements apart: more storage cells than a strip draws
    far = torch.zeros(4096).as_strided((16, 16), (256, 2))
    ex = explore({"x": x, "cols": x[:, ::2], "big": far})
    assert ex.explain_pane.selected_index is None  # closed until asked
    ex.explain_button.click()
    assert ex.explain_pane.selected_index == 0
    assert "Select one or more tensors" in ex.explain_message.value
    assert ex.explain_picture.layout.display == "none"
    ex.expand_box.value = True
    ex.tensor_list.value = ("x", "cols")
    ex.explain_button.click()
    # the interactive panel (issue 30) of the selection; the static picture kept, hidden
    (live,) = ex.explain_live.children
    assert [v["name"] for s in live.plan["strips"] for v in s["views"]] == ["x", "cols"]
    assert [s["storage"] for s in live.plan["strips"]] == [ex.tensor_layout.storage("x").index]
    assert bytes(ex.explain_picture.value).startswith(PNG) and ex.explain_picture.layout.display == "none"
    assert "x, cols" in ex.explain_message.value and ex.last_error is None
    ex.tensor_list.value = ("cols",)  # the open pane follows the selection
    assert [v["name"] for s in ex.explain_live.children[0].plan["strips"] for v in s["views"]] == ["cols"]
    ex.tensor_list.value = ("big",)
    ex.explain_button.click()
    assert ex.explain_live.children == ()
    assert ex.explain_message.value.startswith(
        '<span class="tvz-error">Too large to explain cell by cell: '
        "explain draws at most MAX_CELLS=256 storage cells per strip"
    )
    assert ex.explain_picture.layout.display == "none"


def test_explain_figure_numbers_storages_like_the_explorer():
    x = torch.arange(12.0).reshape(3, 4)
    lay = tv.analyze({"w": torch.zeros(4), "x": x, "xt": x.t()})
    fig = tw.explain_figure(lay, ("xt",))
    (strip,) = fig.tensorviz_plan.strips
    assert strip.storage == 1 and strip.nbytes == 48 and [v.name for v in strip.views] == ["xt"]
    assert strip.views[0].addresses.tolist() == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]


def test_sub_layout_keeps_metadata_only():
    lay = tv.analyze(seed_tensors())
    sub = tw.sub_layout(lay, ("b", "c"))
    assert sub.names == ("b", "c") and len(sub.storages) == 1 and sub.storages[0].nbytes == 16000
    assert sub["c"] == lay["c"]


def test_save_check_pane(shown):
    saving = pytest.importorskip("tensorviz.savecheck.report")
    model = TiedLM()
    ex = explore(model)
    assert ex.save_pane is not None and ex.save_body.value == ""  # computed only when opened
    ex.save_pane.selected_index = 0
    assert ex.save_body.value == saving.save_check(model).to_html()  # the model's own check
    assert ex.last_error is None


# -- errors, memory, static output ----------------------------------------------------------------
def test_callback_errors_reach_the_status_line(shown, monkeypatch):
    ex = explore(seed_tensors())
    before = ex.png

    def boom(state):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(ex._renderer, "get", boom)
    ex.by_toggle.value = "span"
    assert ex.status == (
        "⚠ redraw failed: RuntimeError: renderer exploded (the full traceback is in explorer.last_traceback)"
    )
    assert isinstance(ex.last_error, RuntimeError) and "renderer exploded" in ex.last_traceback
    assert ex.png == before


def test_explorer_keeps_no_tensor_reference(shown):
    model = TiedLM()
    ref, wref = weakref.ref(model), weakref.ref(model.wte.weight)
    ex = explore(model)
    del model
    gc.collect()
    assert ref() is None and wref() is None
    ex.by_toggle.value = "span"  # still fully working on metadata alone
    assert bars(ex)[0] == ("wte.weight ≡ lm_head.weight", 0, 3200)


def test_mimebundle_is_the_widget_and_text_once_the_stand_in_is_out(shown):
    """explore() emitted the picture as its own output: the explorer's bundle carries none, so
    no frontend shows it twice (each renders one mimetype of an output)."""
    ex = explore(FusedQKV())
    ex.by_toggle.value = "span"
    b = ex._repr_mimebundle_()
    assert set(b) == {"text/plain", "application/vnd.jupyter.widget-view+json"}
    assert b["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.model_id
    assert b["text/plain"].startswith("tensorviz explorer (FusedQKV): 6 tensors on 4 storages")
    assert "grouped by exact span" in b["text/plain"] and "qkv.weight" in b["text/plain"]


def test_mimebundle_carries_the_picture_without_a_stand_in(shown):
    ex = explore(FusedQKV(), snapshot=False)
    assert shown == []
    b = ex._repr_mimebundle_()
    assert set(b) == {"text/plain", "application/vnd.jupyter.widget-view+json", "image/png"}
    assert base64.b64decode(b["image/png"]) == ex.png


def test_snapshot_emits_the_current_state(shown):
    from tensorviz.explorer.static import src_mark

    ex = explore(FusedQKV())
    ex.by_toggle.value = "overlap"
    ex.snapshot()
    assert len(shown) == 2
    first, now = shown
    live = f"tvz-live-{ex.model_id}"
    assert first.hide_when_live == live and not now.hide_when_live
    assert now.png == ex.png != first.png
    assert "grouped by overlap" in now.caption and "grouped by storage" in first.caption
    # the stand-in is a picture and a caption only: no HTML a sanitizer or a non-Lab page could drop
    stand_in = first._repr_mimebundle_()
    assert set(stand_in) == {"text/plain", "image/png"}
    assert stand_in["text/plain"] == f"{first.head()} [stand-in for {live}]"
    marked = base64.b64decode(stand_in["image/png"])
    assert src_mark(live) in stand_in["image/png"]
    assert _png_pixels(marked) == _png_pixels(first.png)  # the mark changes no pixel
    assert b"tEXttensorviz\0stand-in for " + live.encode() in marked
    # the current-state snapshot is ordinary visible output
    assert "<style" not in now.to_html() and "hidden" not in now.to_html()
    assert now._repr_mimebundle_(include={"image/png"}) == {"image/png": base64.b64encode(ex.png).decode()}


def _png_pixels(png: bytes) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return im.convert("RGBA").tobytes()


def test_the_live_explorer_carries_the_rule_that_hides_its_stand_in(shown):
    from tensorviz.explorer.static import src_mark

    ex = explore(FusedQKV())
    live = f"tvz-live-{ex.model_id}"
    rule = ex.children[-1]
    assert rule.layout.display == "none" and "tvz-stand-in-rule" in rule._dom_classes
    on = f"body:has(.{live} .tvz-canvas canvas)"
    assert rule.value == (
        f'<style>{on} .jp-OutputArea-child:has(img[src*="{src_mark(live)}"]), '
        f'{on} img[src*="{src_mark(live)}"], {on} img[alt*="{live}"] {{display: none !important}}</style>'
    )
    assert src_mark(live) != src_mark(f"tvz-live-{explore(FusedQKV()).model_id}")  # one explorer's only


def test_stand_in_marks_refuse_a_hostile_class_name():
    from tensorviz.explorer.static import Snapshot, marked_png, png_size, src_mark, stand_in_rule

    for evil in ('x"] body{', "tvz-live-a b", "tvz-live-\u00e9"):
        with pytest.raises(ValueError, match="CSS class name"):
            Snapshot(PNG, "", "c", "", hide_when_live=evil)._repr_mimebundle_()
        with pytest.raises(ValueError, match="CSS class name"):
            stand_in_rule(evil)
    assert png_size(b"not a png") == (1, 1)
    assert marked_png(b"not a png", "tvz-live-abc") == b"not a png"
    assert set(src_mark("tvz-live-abc")) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def test_explore_pauses_the_collector_only_while_it_builds(shown, monkeypatch):
    """No collector pass over the kernel's whole heap while the explorer is built and drawn
    (it cost 0.2-0.36 s of a 70B model's first display); enabled again after, and a caller's
    own pause is left as it was."""
    enabled, static = [], Explorer.static
    monkeypatch.setattr(Explorer, "static", lambda ex, *a, **k: enabled.append(gc.isenabled()) or static(ex, *a, **k))
    model = TiedLM()
    ex = explore(model)
    assert enabled == [False] and gc.isenabled() and ex.diagram.bars
    gc.disable()
    try:
        explore(model)
        assert enabled == [False, False] and not gc.isenabled()
    finally:
        gc.enable()


def test_no_output_outside_ipython(capsys):
    explore(seed_tensors())  # a plain script: explore() must not print a snapshot
    assert capsys.readouterr().out == ""


def test_no_match_shows_a_message(shown):
    ex = explore(seed_tensors())
    ex.name_filter.value = "nothing-matches"
    assert ex.diagram.bars == () and ex.tensor_list.options == ()
    assert ex.status == "nothing to draw: no tensor matches (grouped by storage, names matching /nothing-matches/)."
    assert html.escape("/nothing-matches/") in ex.status_line.value


def test_executed_notebook_keeps_static_pictures(tmp_path):
    """Run under a real kernel (nbclient): explore() emits the stand-in, an image/png output of the
    first state, then the explorer's own output: the widget view and escaped text."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import torch, tensorviz as tv\n"
            "a = torch.rand(8, 10, 50)\n"
            "ex = tv.explore({'a': a, '<b>': a[2:4]}, by='span')\n"
            "ex"
        )
    ]
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    snap, result = nb.cells[0].outputs
    assert snap.output_type == "display_data" and result.output_type == "execute_result"
    assert set(snap.data) == {"text/plain", "image/png"}
    assert base64.b64decode(snap.data["image/png"]).startswith(PNG)
    assert set(result.data) == {"text/plain", "application/vnd.jupyter.widget-view+json"}
    model_id = result.data["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert snap.data["text/plain"].endswith(f"[stand-in for tvz-live-{model_id}]")
    assert result.data["text/plain"].startswith("tensorviz explorer (dict): 2 tensors on 1 storage")


def test_explorer_title_shows_a_hostile_source_as_escapes(shown, tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "ckpt\x1b[2J\u202eevil.safetensors"
    save_file({"w": torch.zeros(2, 2)}, str(path))
    ex = explore(str(path))
    plain = ex._repr_mimebundle_()["text/plain"]
    assert "\x1b" not in plain and "\u202e" not in plain
    assert "ckpt\\x1b[2J\\u202eevil.safetensors" in plain.splitlines()[0]


# -- planning once ------------------------------------------------------------------------------------
def _many_storages() -> dict[str, torch.Tensor]:
    x = torch.zeros(64)
    return {"x": x, "a": x[:8], **{f"w{i}": torch.zeros(4) for i in range(50)}}


@pytest.mark.parametrize(
    "make, options",
    [
        (seed_tensors, {}),
        (TiedLM, {"by": "span"}),
        (FusedQKV, {"by": "overlap", "show_unreferenced": False}),
        (tiny_gpt2, {}),  # 27 simple storages folded into the summary row
        (_many_storages, {}),  # 51 storages: more lanes than the budget, an overview
        (_many_storages, {"expand_simple": True, "names": "w1"}),
    ],
)
def test_the_static_picture_is_the_planners_own(make, options, shown, monkeypatch):
    """The explorer plans a state once; the static picture derives from that plan when its lanes fit
    the budget: the same Diagram and PNG as ``tv.diagram(max_lanes=40)`` would give."""
    from tensorviz.plan import planner
    from tensorviz.render.mpl import png_bytes, render

    plans, plan = [], planner.plan
    monkeypatch.setattr(planner, "plan", lambda layout, opts: plans.append(opts.max_lanes) or plan(layout, opts))
    ex = explore(make(), **options)
    capped, png = ex._renderer.picture(ex.state)
    want = tv.diagram(ex.tensor_layout, max_lanes=40, **ex.state.diagram_options())
    assert capped.options == want.options and capped.to_text() == want.to_text()
    assert (capped.overview is None) == (want.overview is None) and capped.hidden_storages == want.hidden_storages
    fits = len(ex.diagram.lanes) <= 40
    assert plans == ([1 << 62] if fits else [1 << 62, 40])  # the canvas's plan, then the picture's if needed
    fig = render(want)
    assert png == png_bytes(fig, dpi=100, compress_level=1)
    fig.clear()


def test_display_is_the_static_picture_outside_marimo(shown):
    ex = explore(FusedQKV())
    shown_now = ex._display_()  # what marimo would ask for; elsewhere nobody calls it
    assert isinstance(shown_now, Snapshot) and shown_now.png == ex.png


def test_marimo_controls_drive_the_explorer(shown):
    """The marimo view's elements set the explorer's own controls, which replan as in JupyterLab
    (the browser side: tests/browser/test_browser_frontends.py)."""
    pytest.importorskip("marimo")
    from tensorviz.explorer.marimo import marimo_view

    ex = explore(FusedQKV())
    marimo_view(ex)
    by, names, only_shared, unreferenced, expand, storage, every = ex.marimo_controls
    assert by.value == "storage" and [only_shared.value, unreferenced.value, every.value] == [False, True, False]
    revision = ex.canvas.revision
    by._update("exact span")  # as a click in the browser arrives
    assert ex.state.by == "span" and ex.canvas.revision == revision + 1
    names._update("^q")
    assert ex.state.names == "^q" and ex.canvas.drawn_names == ["qkv.weight", "q.weight"]
