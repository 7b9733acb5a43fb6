"""matplotlib rendering, checked on the drawn artists: coordinates equal the layout's bytes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import tensorviz as tv
from tensorviz.plan.diagram import diagram
from tensorviz.render.mpl import (
    BAR_HEIGHT,
    HATCH_LIMIT,
    STYLE,
    drawn_rects,
    layer,
    names_at,
    png_bytes,
    render,
    short_label,
    texts,
    to_png,
)
from tests.helpers.models import FusedQKV, QVOnly, TiedLM, meta_model, seed_tensors, tiny_gpt2


def pixels(fig) -> np.ndarray:
    import io

    from matplotlib.image import imread

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    buf.seek(0)
    return imread(buf)


def assert_same_picture(fig_test, fig_ref) -> None:
    """check_figures_equal with tol=0, without writing result_images/ into the working tree."""
    a, b = pixels(fig_test), pixels(fig_ref)
    assert a.shape == b.shape
    assert np.abs(a - b).max() == 0, f"{int((np.abs(a - b).max(axis=-1) > 0).sum())} pixels differ"


def xranges(fig, gid) -> list[tuple[float, float]]:
    """(x0, x1) of each rectangle the layer draws, read back from its paths."""
    r = drawn_rects(fig, gid)
    return list(zip(r[:, :, 0].min(axis=1).tolist(), r[:, :, 0].max(axis=1).tolist()))


def ycentres(fig, gid) -> list[float]:
    r = drawn_rects(fig, gid)
    return ((r[:, :, 1].min(axis=1) + r[:, :, 1].max(axis=1)) / 2).tolist()


def assert_drawn_like_layout(fig, layout) -> None:
    """Every drawn polygon sits exactly on the bytes the layout reports for its names."""
    d = fig.tensorviz_diagram
    owners = layer(fig, "spans").tensorviz_owner.tolist()
    assert sorted(owners) == [i for i, b in enumerate(d.bars) if not b.empty]
    for k, (x0, x1) in enumerate(xranges(fig, "spans")):
        bar = d.bars[owners[k]]
        for name in names_at(fig, "spans", k):
            v = layout[name]
            assert (x0, x1) == (v.start, v.stop)
        assert ycentres(fig, "spans")[k] == pytest.approx(bar.lane)
    foot = layer(fig, "footprints")
    for i, bar in enumerate(d.bars):
        mine = [xr for xr, o in zip(xranges(fig, "footprints"), foot.tensorviz_owner) if o == i]
        if bar.runs is None:
            assert mine == []
        else:
            expect = layout.footprint_runs(bar.names[0])
            assert np.array(mine).tolist() == expect.astype(float).tolist()
    unref = layer(fig, "unreferenced")
    assert len(unref.tensorviz_owner) == len(xranges(fig, "unreferenced"))
    for bi, block in enumerate(d.blocks):
        mine = [xr for xr, o in zip(xranges(fig, "unreferenced"), unref.tensorviz_owner) if o == bi]
        want = layout.unreferenced_runs(block.key).tolist() if d.lanes[block.lanes[0]].kind == "storage" else []
        assert np.array(mine).reshape(-1, 2).tolist() == want
    extents = layer(fig, "extents")
    assert xranges(fig, "extents") == [(0.0, float(d.blocks[o].nbytes)) for o in extents.tensorviz_owner]


@pytest.mark.parametrize(
    "make,by",
    [
        (seed_tensors, "storage"),
        (FusedQKV, "storage"),
        (QVOnly, "storage"),
        (TiedLM, "storage"),
        (TiedLM, "span"),
        (meta_model, "overlap"),
        (tiny_gpt2, "span"),
    ],
)
def test_drawn_rectangles_equal_layout_bytes(make, by):
    layout = tv.analyze(make())
    fig = render(diagram(layout, by=by, expand_simple=True))
    assert_drawn_like_layout(fig, layout)


def test_strided_views_draw_exact_footprint_runs():
    x = torch.arange(24.0).reshape(4, 6)
    layout = tv.analyze({"x": x, "even": x[:, ::2], "odd": x[:, 1::2], "row": x[0].expand(3, 6)})
    fig = render(diagram(layout, by="overlap"))
    assert_drawn_like_layout(fig, layout)
    foot = layer(fig, "footprints")
    even = [xr for k, xr in enumerate(xranges(fig, "footprints")) if names_at(fig, "footprints", k) == ("even",)]
    assert even[:3] == [(0.0, 4.0), (8.0, 12.0), (16.0, 20.0)]
    assert len(foot.tensorviz_owner) == len(xranges(fig, "footprints"))
    assert xranges(fig, "expanded") == [(0.0, 24.0)]
    assert names_at(fig, "expanded", 0) == ("row",)
    # strided spans are drawn light (their exact runs are solid), dense spans opaque
    spans = layer(fig, "spans")
    alphas = {names_at(fig, "spans", k)[0]: a for k, a in enumerate(spans.get_facecolor()[:, 3])}
    assert alphas["even"] == pytest.approx(0.22) and alphas["x"] == pytest.approx(1.0)


def test_lane_labels_match_grouping():
    fig = render(diagram(TiedLM(), by="span"))
    ax = fig.axes[0]
    assert texts(fig, "lane-label") == ["storage #0 · 3.1 KiB", "wte.weight ≡ lm_head.weight"]
    assert [t.get_position()[1] for t in ax.texts if t.get_gid() == "lane-label"] == [0, 1]  # on their rows
    assert [t.get_fontweight() for t in ax.texts if t.get_gid() == "lane-label"] == ["bold", "normal"]
    assert [s.strip() for s in texts(fig, "lane-note")] == ["2 simple storages, 128 B"]
    assert ax.get_yticks().tolist() == []
    assert ax.get_ylim() == (2.5, -0.5)
    assert "1 shared group (by span)" in ax.get_title(loc="left")


def test_overlap_marks_and_storage_layers():
    layout = tv.analyze(seed_tensors())
    fig = render(diagram(layout))
    assert [(names_at(fig, "overlaps", k), xr) for k, xr in enumerate(xranges(fig, "overlaps"))] == [
        (("a",), (4000.0, 12000.0)),
        (("b",), (4000.0, 8000.0)),
        (("c",), (8000.0, 12000.0)),
    ]
    assert xranges(fig, "storage-overlaps") == [(4000.0, 12000.0)]
    assert names_at(fig, "extents", 0) == ("a", "b", "c")
    # the overlap strip sits inside its bar, along the bottom
    ys = drawn_rects(fig, "overlaps")[1][:, 1]
    assert 2 - BAR_HEIGHT / 2 < ys.min() < ys.max() == pytest.approx(2 + BAR_HEIGHT / 2)
    # a mark layer is one compound path (hatched in one pass): 5 vertices per rectangle
    path = layer(fig, "overlaps").get_path()
    assert len(path.vertices) == 15 and path.codes.tolist() == [1, 2, 2, 2, 79] * 3
    assert layer(fig, "overlaps").tensorviz_owner.tolist() == [0, 1, 2]


def test_png_bytes_leaves_the_figure_as_it_was():
    from matplotlib.backend_bases import FigureCanvasBase

    fig = render(diagram(seed_tensors()))
    canvas, dpi = fig.canvas, fig.dpi
    png = png_bytes(fig, dpi=50, compress_level=1)
    assert png.startswith(b"\x89PNG") and fig.canvas is canvas and fig.dpi == dpi
    assert isinstance(canvas, FigureCanvasBase)
    width, height = (int(x) for x in fig.get_size_inches() * 50)
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (width, height)
    assert png[25] == 2  # colour type RGB: an opaque figure needs no alpha channel


def strip_pixels(fig, png: bytes, k: int) -> np.ndarray:
    """The RGB pixels inside overlap strip ``k`` (its edge pixels left out)."""
    import io

    from matplotlib.image import imread

    img = imread(io.BytesIO(png))[..., :3]
    (x0, y0), (x1, y1) = fig.axes[0].transData.transform(drawn_rects(fig, "overlaps")[k][[0, 2]])
    top, bottom = sorted((img.shape[0] - y0, img.shape[0] - y1))
    return img[int(np.ceil(top)) + 1 : int(bottom) - 1, int(np.ceil(min(x0, x1))) + 1 : int(max(x0, x1)) - 1]


def test_overlap_strips_stand_out_on_every_palette_colour():
    from matplotlib.colors import to_rgb

    from tensorviz.plan.diagram import PALETTE

    w = torch.zeros(len(PALETTE), 64)
    views = {"all": w} | {f"rows{i}": w[i : i + 2] for i in range(len(PALETTE) - 1)}  # each overlaps another
    d = diagram(views)
    assert [b.color for b in d.bars] == list(PALETTE)  # one storage: its bars take the palette in lane order
    fig = render(d)
    png = png_bytes(fig)
    owners = layer(fig, "overlaps").tensorviz_owner
    for k, owner in enumerate(owners):
        bar = d.bars[owner]
        px = strip_pixels(fig, png, k)
        assert px.size, bar
        apart = np.abs(px - to_rgb(bar.color)).sum(axis=-1) > 0.5
        # most of the strip (white ground and red crosses) differs clearly from the bar's colour
        assert apart.mean() > 0.6, (bar.label, bar.color, apart.mean())
        assert (px.min(axis=-1) > 0.9).mean() > 0.3 and (
            np.abs(px - to_rgb(STYLE["overlaps"]["edgecolor"])).sum(-1) < 0.5
        ).any(), bar.label  # white with red crosses


def test_in_bar_names_are_white_on_dark_bars_black_on_light():
    from tensorviz.render.mpl.words import ink

    flat = torch.zeros(64 * 12, device="meta")
    views = {f"layers.{i}.weight": flat[64 * i : 64 * (i + 1)] for i in range(12)}
    fig = render(diagram(views, by="overlap"))
    d = fig.tensorviz_diagram
    colour = {b.label.removesuffix(".weight"): b.color for b in d.bars}  # the shared ".weight" is dropped
    labels = [t for t in fig.axes[0].texts if t.get_gid() == "bar-label"]
    assert len(labels) == 12
    assert {t.get_color() for t in labels} == {"white", "black"}
    for t in labels:
        assert t.get_color() == ink(colour[t.get_text()])
    assert ink("#aa3377") == "white" and ink("#ccbb44") == "black"


def test_unreferenced_layer_and_label():
    fig = render(diagram(QVOnly()))
    assert xranges(fig, "unreferenced") == [(800.0, 1600.0)]
    assert layer(fig, "unreferenced").get_hatch() == "////"
    assert texts(fig, "lane-label")[0] == "storage #0 · 2.3 KiB\n800 B unreferenced"
    assert texts(fig, "run-label") == ["unreferenced 800 B"]


def test_unreferenced_run_label_drawn_per_cell_is_a_bound(monkeypatch):
    """Drawn per cell, an "unreferenced" run is cells holding an unread byte: its label says
    "≤" its length; the storage's label keeps the exact count."""
    from tensorviz.plan import bars

    monkeypatch.setattr(bars, "DRAW_RUNS", 4)  # x[::2] lists 500 runs: drawn per cell
    monkeypatch.setattr(bars, "DRAW_CELLS", 10)  # of 100 bytes, each half read
    fig = render(diagram({"even": torch.zeros(1000, dtype=torch.uint8)[::2]}))
    assert xranges(fig, "unreferenced") == [(0.0, 1000.0)]
    assert texts(fig, "run-label") == ["unreferenced ≤ 1000 B"]
    assert texts(fig, "lane-label")[0] == "storage #0 · 1000 B\n500 B unreferenced"


def test_file_header_layer_label_and_legend(tmp_path):
    from tests.plan.test_diagram import gappy_safetensors

    path = tmp_path / "gappy.safetensors"
    ds = gappy_safetensors(path)
    layout = tv.analyze(path)
    fig = render(diagram(layout))
    assert xranges(fig, "header") == [(0.0, float(ds))]
    assert names_at(fig, "header", 0) == ("a", "b")
    assert xranges(fig, "unreferenced") == [(ds, ds + 2.0), (ds + 8.0, ds + 16.0), (ds + 24.0, ds + 32.0)]
    assert layer(fig, "header").get_hatch() == STYLE["header"]["hatch"] != layer(fig, "unreferenced").get_hatch()
    assert texts(fig, "run-label") == [f"header {ds} B"]  # the gaps are too thin for words
    assert texts(fig, "lane-label")[0] == f"storage #0 · gappy.safetensors · {ds + 32} B\n18 B unreferenced"
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["file header", "unreferenced"]
    assert fig.axes[0].get_xlabel() == "bytes from the start of each file"
    assert not layer(render(diagram(seed_tensors())), "header").get_visible()  # no file, no header


def test_byte_axis_ticks_and_readout():
    fig = render(diagram(seed_tensors()))
    ax = fig.axes[0]
    fig.draw_without_rendering()
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == ["0", "2 KiB", "4 KiB"]
    assert ax.get_xlim() == (0.0, 16000.0)
    assert ax.format_coord(4000.4, 2.1) == "byte 4,000 (3.906 KiB) · b [4000, 8000)"
    assert ax.format_coord(100, 0) == "byte 100 · storage #0 · 15.6 KiB"


def test_zoom_sets_limits_and_offset():
    big = torch.zeros(2**28, dtype=torch.uint8, device="meta")
    layout = tv.analyze({"big": big, "bit": big[2**27 + 64 : 2**27 + 192]})
    fig = render(diagram(layout, byte_range=(2**27, 2**27 + 256)))
    ax = fig.axes[0]
    fig.draw_without_rendering()
    assert ax.get_xlim() == (2.0**27, 2.0**27 + 256)
    assert ax.xaxis.get_major_formatter().get_offset() == "+128 MiB"
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == ["0", "32 B", "64 B"]
    assert xranges(fig, "spans")[1] == (2.0**27 + 64, 2.0**27 + 192)


def test_many_views_stay_readable_and_fast_to_build():
    flat = torch.zeros(5000 * 4, device="meta")
    views = {f"model.layers.{i}.mlp.down_proj.weight": flat[4 * i : 4 * i + 4] for i in range(5000)}
    d = diagram(views)
    fig = render(d)
    assert len(layer(fig, "spans").get_paths()) == 5000  # every view drawn, in one collection
    labels = texts(fig, "lane-label")
    assert len(labels) == 40 and labels[-1] == "… 4,962 more views"
    assert max(len(s) for s in labels) <= 44
    assert labels[1] == "model.layers.0.mlp.down_proj.weight"
    assert fig.get_size_inches()[1] < 15
    # each view on a row of its own is far under a pixel wide: a tick at its centre shows it
    slivers = layer(fig, "slivers")
    assert slivers.tensorviz_owner.tolist() == list(range(38))
    assert [seg[0, 0] for seg in slivers.get_segments()] == [(b.start + b.stop) / 2 for b in d.bars[:38]]
    assert all(seg[0, 1] == d.bars[k].lane - BAR_HEIGHT / 2 for k, seg in enumerate(slivers.get_segments()))


def test_render_into_given_axes_and_reused_figure():
    d = diagram(seed_tensors())
    fig = Figure()
    ax = fig.add_subplot()
    assert render(d, ax) is fig and ax.tensorviz_diagram is d
    reused = render(diagram(TiedLM()), figure=fig)
    assert reused is fig and len(fig.axes) == 1
    assert fig.tensorviz_diagram.bars[0].label == "wte.weight"
    png = to_png(d, figure=fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == []


def test_picture_depends_on_bytes_not_dtype():
    fig_test, fig_ref = Figure(), Figure()
    a = torch.zeros(8, 10, 50)
    render(diagram({"a": a, "b": a[2:4]}), figure=fig_test)
    u = torch.zeros(16000, dtype=torch.uint8)
    render(diagram({"a": u, "b": u[4000:8000]}), figure=fig_ref)
    assert_same_picture(fig_test, fig_ref)
    c = torch.zeros(16000, dtype=torch.uint8)
    render(diagram({"a": c, "b": c[4000:8400]}), figure=fig_ref)  # a longer b: a different picture
    with pytest.raises(AssertionError, match="pixels differ"):
        assert_same_picture(fig_test, fig_ref)


def test_reused_figure_draws_like_a_new_one():
    fig_test, fig_ref = Figure(), Figure()
    render(diagram(seed_tensors(), by="overlap"), figure=fig_test)
    render(diagram(FusedQKV()), figure=fig_test)  # reuse: nothing of the first picture may remain
    render(diagram(FusedQKV()), figure=fig_ref)
    assert_same_picture(fig_test, fig_ref)


def test_layout_plot_is_render_of_diagram():
    layout = tv.analyze(TiedLM())
    fig = layout.plot(by="span")
    assert isinstance(fig, Figure)
    assert_same_picture(fig, render(diagram(layout, by="span")))


def test_in_bar_labels_on_packed_rows_drop_the_shared_suffix():
    flat = torch.zeros(64 * 40, device="meta")
    names = [f"layers.{i // 4}.{'qkvo'[i % 4]}_proj.weight" for i in range(40)]
    views = {n: flat[64 * i : 64 * (i + 1)] for i, n in enumerate(names)}
    fig = render(diagram(views, by="overlap", byte_range=(0, 64 * 4 * 8)))
    inside = texts(fig, "bar-label")
    assert inside[:5] == ["0.q_proj", "0.k_proj", "0.v_proj", "0.o_proj", "1.q_proj"]  # what fits
    assert short_label("layers.12.k_proj.weight", 12, ".weight") == "12.k_proj"
    assert short_label("layers.12.k_proj.weight", 30) == "layers.12.k_proj.weight"
    assert short_label("a.b", 2) is None


def test_in_bar_labels_never_drop_what_tells_bars_apart():
    flat = torch.zeros(64 * 8, device="meta")
    names = [f"layers.{i // 4}.{'qkvo'[i % 4]}_proj.weight" for i in range(8)]
    views = {n: flat[64 * i : 64 * (i + 1)] for i, n in enumerate(names)}
    narrow = render(diagram(views, by="overlap"), width=6.2)  # room for "q_proj", not "0.q_proj"
    assert texts(narrow, "bar-label") == []  # "q_proj" alone would not say which layer
    wide = render(diagram(views, by="overlap"), width=8)
    assert texts(wide, "bar-label") == [
        "0.q_proj",
        "0.k_proj",
        "0.v_proj",
        "0.o_proj",
        "1.q_proj",
        "1.k_proj",
        "1.v_proj",
        "1.o_proj",
    ]


def test_long_storage_labels_keep_number_and_size():
    from tensorviz.render.mpl.words import storage_text

    assert (
        storage_text("storage #0 · small_model.safetensors · 5.5 KiB", 46)
        == "storage #0 · small_model.safetensors · 5.5 KiB"
    )
    assert storage_text("storage #0 · small_model.safetensors · 5.5 KiB", 44) == "storage #0 · small_model · 5.5 KiB"
    assert (
        storage_text("storage #10 · small_model_weights.safetensors · 5.5 KiB", 44)
        == "storage #10 · small_model_weights · 5.5 KiB"
    )
    assert (
        storage_text("storage #2 · model-00003-of-00009.safetensors · 4.9 GiB", 40)
        == "storage #2 · model-00003…00009 · 4.9 GiB"
    )
    assert storage_text("storage #1 · meta · 4.0 KiB", 20) == "#1 · meta · 4.0 KiB"  # no room: "#1"


def test_hatch_layers_become_fills_past_the_limit():
    w = torch.zeros(HATCH_LIMIT + 10, 2)
    views = {"w": w} | {f"r{i}": w[i] for i in range(HATCH_LIMIT + 10)}
    fig = render(diagram(views, max_lanes=10))
    overlaps = layer(fig, "overlaps")
    assert len(drawn_rects(fig, "overlaps")) == HATCH_LIMIT + 11 and not overlaps.get_hatch()
    # the hatch colour at 45 % over the strip's white face: opaque pink, on any bar colour
    assert overlaps.get_facecolor() == pytest.approx(
        (0.8 * 0.45 + 0.55, 0.2 * 0.45 + 0.55, 0.0667 * 0.45 + 0.55, 1), abs=1e-3
    )
    assert layer(fig, "storage-overlaps").get_hatch() == "xxxx"  # one mark: still hatched


def test_empty_diagram_says_so_without_warnings():
    import warnings

    d = diagram(seed_tensors(), names="nothing-matches")
    assert d.lanes == () and d.bars == ()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = render(d)
        assert to_png(d).startswith(b"\x89PNG")
    assert [t.get_text() for t in fig.axes[0].texts] == ["nothing to draw: no tensor matches the filters"]
    assert d.to_text() == d.header.text


# -- display in Jupyter without pyplot ---------------------------------------------------------
_DISPLAY_SCRIPT = r"""
import json, torch, tensorviz as tv
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.pylabtools import select_figure_formats
from traitlets.config import Config
config = Config()
config.HistoryManager.enabled = False
shell = InteractiveShell.instance(config=config)
figs = {"explain": tv.explain(torch.zeros(2, 2)), "plot": tv.analyze({"w": torch.zeros(4)}).plot()}
out = {}
def formatted(mode):
    for kind, fig in figs.items():
        data, _ = shell.display_formatter.format(fig)
        out[f"{mode} {kind}"] = {k: type(v).__name__ for k, v in sorted(data.items())}
formatted("fresh")
select_figure_formats(shell, {"png"})   # what %matplotlib inline registers
formatted("inline")
select_figure_formats(shell, {"svg"})
formatted("inline-svg")
print(json.dumps(out))
"""


def test_returned_figures_display_as_png_once_with_or_without_matplotlib_inline(tmp_path):
    """A fresh kernel gets the PNG from ``_repr_png_`` (bytes) and the inline SVG from
    ``_repr_html_``; with %matplotlib inline the backend's type-registered printer makes the one
    image (base64 str) and ours step aside."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, IPYTHONDIR=str(tmp_path), MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, "-c", _DISPLAY_SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    for kind in ("explain", "plot"):
        # one picture: JupyterLab shows the HTML (the SVG that fits the output), PNG-only readers the PNG
        assert out[f"fresh {kind}"] == {"image/png": "bytes", "text/html": "str", "text/plain": "str"}
        assert out[f"inline {kind}"] == {"image/png": "str", "text/plain": "str"}
        assert out[f"inline-svg {kind}"] == {"image/svg+xml": "str", "text/plain": "str"}


def test_returned_figure_is_a_real_figure_with_its_own_png():
    fig = tv.analyze(seed_tensors()).plot()
    assert isinstance(fig, Figure) and plt.get_fignums() == []
    assert "spans" in {c.get_gid() for c in fig.axes[0].collections}
    png = fig._repr_png_()
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (w, h) == (round(fig.get_figwidth() * 100), round(fig.get_figheight() * 100))
    reused = render(diagram(seed_tensors()), figure=Figure())
    assert type(reused) is Figure  # a caller's figure is drawn into, not replaced


def test_a_narrow_figure_shortens_words_not_the_plot():
    """width=4: the header wraps at a " · " and stays inside the figure, the lane labels get a
    40 % margin ("#0 · 2.3 KiB"), and the axis gets fewer ticks so labels do not collide."""
    fig = render(diagram(FusedQKV()), width=4)
    ax = fig.axes[0]
    assert ax.get_position().x0 == pytest.approx(0.4)
    assert texts(fig, "lane-label") == ["#0 · 2.3 KiB", "qkv.weight", "q.weight", "v.weight"]
    title = ax.get_title(loc="left")
    assert title == "6 tensors · 4 storages · 1 shared group (by storage)\nunique 2.5 KiB vs naive 4.1 KiB"
    fig.canvas.draw()
    assert ax._left_title.get_window_extent().x1 <= fig.bbox.x1  # the left title: no public accessor
    assert ax.xaxis.get_major_locator().nbins == 3
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1 KiB", "2 KiB"]
    wide = render(diagram(FusedQKV()))
    assert "\n" not in wide.axes[0].get_title(loc="left")
    assert texts(wide, "lane-label")[0] == "storage #0 · 2.3 KiB"
    assert wide.axes[0].xaxis.get_major_locator().nbins == 8


def test_header_too_wide_for_two_lines_starts_at_the_figure_edge_and_shrinks(tmp_path):
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(2), "b": torch.zeros(3)}, tmp_path / "t1.safetensors")
    fig = render(tv.diagram(tmp_path / "t1.safetensors"), width=3)
    ax = fig.axes[0]
    assert ax.get_title(loc="left").splitlines() == [
        "2 tensors · 1 file · 0 shared groups (by shared bytes within a file)",
        "unique 20 B vs naive 20 B",
    ]
    title = ax._left_title
    assert title.get_fontsize() < 9 and title.get_position()[0] < 0
    fig.canvas.draw()
    box = title.get_window_extent()
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
    assert texts(fig, "lane-label")[0] == "#0 · 140 B"
