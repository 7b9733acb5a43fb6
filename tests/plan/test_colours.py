"""Bar colours: one colour per name for a layout, in every diagram of it and every renderer;
distinct within a storage and between neighbouring lanes (tensorviz.plan.colors)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from matplotlib.colors import to_hex, to_rgb

import tensorviz as tv
from tensorviz.plan.colors import colours_at
from tensorviz.plan.diagram import PALETTE, colour_ordinals, diagram, palette_colour
from tensorviz.render.mpl import layer, render

K = len(PALETTE)
ROLES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "in_norm", "post_norm")


def llama_like(layers: int = 14, dim: int = 16) -> dict[str, torch.Tensor]:
    """A Llama-shaped state on meta: a tied embedding, then 9 weights per layer, each its own storage."""
    shapes = {"q_proj": (dim, dim), "k_proj": (dim // 2, dim), "v_proj": (dim // 2, dim), "o_proj": (dim, dim)}
    shapes |= {"gate_proj": (2 * dim, dim), "up_proj": (2 * dim, dim), "down_proj": (dim, 2 * dim)}
    shapes |= {"in_norm": (dim,), "post_norm": (dim,)}
    with torch.device("meta"):
        embed = torch.empty(64, dim)
        out = {"embed_tokens.weight": embed}
        for i in range(layers):
            out |= {f"layers.{i}.{role}.weight": torch.empty(shapes[role]) for role in ROLES}
        return out | {"norm.weight": torch.empty(dim), "lm_head.weight": embed}


def one_file(layers: int = 14, per_layer: int = 9, sized: bool = False) -> dict[str, torch.Tensor]:
    """All weights laid end to end in one storage, layer by layer (as a safetensors file holds
    them): ``per_layer`` roles of 32 elements each, or (``sized``) of 16 to 40."""
    roles = (ROLES + ("q_norm", "k_norm", "pre_ff_norm", "post_ff_norm"))[:per_layer]
    size = [16 + 2 * k if sized else 32 for k in range(per_layer)] * layers
    flat = torch.empty(sum(size), device="meta")
    names = [f"layers.{i}.{role}.weight" for i in range(layers) for role in roles]
    at = np.cumsum([0, *size]).tolist()
    return {name: flat[at[k] : at[k + 1]] for k, name in enumerate(names)}


def mixed() -> dict[str, torch.Tensor]:
    """Shared, tied, packed, strided, empty and lone views over a few storages."""
    qkv = torch.zeros(48, 8)
    x = torch.zeros(6, 8)
    out = {"qkv": qkv, "q": qkv[:16], "k": qkv[16:32], "v": qkv[32:], "q.tied": qkv[:16]}
    out |= {"x": x, "even": x[:, ::2], "odd": x[:, 1::2], "none": x[:0], "col": x[:, 3]}
    return out | {f"lone{i}": torch.zeros(4 + i) for i in range(5)}


def reference(layout: tv.Layout) -> dict[str, str]:
    """Every name's colour, from the layout alone."""
    return dict(zip(layout.names, colours_at(layout, np.arange(len(layout)))))


def drawn(d) -> dict[str, str]:
    return {name: bar.color for bar in d.bars for name in bar.names}


# -- one colour per name ------------------------------------------------------------------------
OPTIONS = [
    {},
    {"expand_simple": True},
    {"names": "q"},
    {"names": "even|col|lone3"},
    {"only_shared": True},
    {"storages": [1]},
    {"storages": [2, 0]},
    {"byte_range": (512, 1024)},
    {"byte_range": (0, 64), "storages": [1]},
    {"max_lanes": 5},
    {"show_unreferenced": False, "expand_simple": True},
]


@pytest.mark.parametrize("by", ["storage", "span", "overlap"])
@pytest.mark.parametrize("opts", OPTIONS, ids=[str(o) for o in OPTIONS])
def test_a_name_has_one_colour_in_every_diagram_of_its_layout(by, opts):
    layout = tv.analyze(mixed())
    ref = reference(layout)
    d = diagram(layout, by=by, **opts)
    colours = drawn(d)
    assert colours and colours == {name: ref[name] for name in colours}, (by, opts)
    full = drawn(diagram(layout, by=by, expand_simple=True))
    assert colours.items() <= full.items()


def test_the_reference_colours_are_those_of_the_full_picture():
    layout = tv.analyze(mixed())
    ref = reference(layout)
    assert drawn(diagram(layout, by="span", expand_simple=True)) == ref  # every name drawn
    assert ref["q"] == ref["q.tied"]  # an identical span: one colour
    assert ref["even"] != ref["odd"] != ref["x"] != ref["even"]


def test_groupings_filters_zoom_and_storages_keep_colours_on_a_llama_shaped_model():
    layout = tv.analyze(llama_like())
    ref = reference(layout)
    pictures = [
        diagram(layout, by=by, names=names, expand_simple=True, max_lanes=200)
        for by in ("storage", "span", "overlap")
        for names in (None, "q_proj", "layers\\.3\\.", "embed|lm_head")
    ]
    pictures.append(diagram(layout, storages=[0], byte_range=(0, 1024)))
    pictures.append(diagram(layout, storages=list(range(5, 20)), expand_simple=True))
    for d in pictures:
        colours = drawn(d)
        assert colours == {name: ref[name] for name in colours}
    assert ref["embed_tokens.weight"] == ref["lm_head.weight"]
    assert {len(drawn(d)) for d in pictures} >= {1 + 14 * 9 + 2, 14, 9, 2}  # different subsets drawn


# -- distinct where it matters -----------------------------------------------------------------
#: Machado et al. (2009) dichromat simulations, severity 1, on linear RGB.
DICHROMATS = {
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.01182, 0.04294, 0.968881]],
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
}


def test_the_palette_is_prime_and_free_of_greys_and_reds():
    assert K == 13 and all(K % p for p in range(2, K))
    assert len({to_hex(c) for c in PALETTE}) == K and all(to_hex(c) == c for c in PALETTE)
    lab = np.array([_lab(c) for c in PALETTE])
    assert np.hypot(lab[:, 1], lab[:, 2]).min() > 25  # no greys
    assert lab[:, 0].min() > 40  # the marks' black hatches show on every colour
    assert np.linalg.norm(lab - _lab("#cc3311"), axis=1).min() > 20  # the red of overlapping bytes


@pytest.mark.parametrize(
    ("vision", "apart", "next_apart"), [(None, 13, 33), ("deuteranopia", 8.5, 32), ("protanopia", 7, 34)]
)
def test_palette_colours_differ_and_neighbours_differ_most(vision, apart, next_apart):
    """CIE76 differences (the 12 colours before v0.2: 13.1 / 6.5 / 5.3 for any two, 29.2 / 9.9 / 5.3 for neighbours)."""
    lab = np.array([_lab(c, DICHROMATS.get(vision)) for c in PALETTE])
    gaps = [np.linalg.norm(lab[i] - lab[j]) for i, j in itertools.combinations(range(K), 2)]
    neighbours = [np.linalg.norm(lab[i] - lab[(i + 1) % K]) for i in range(K)]  # ordinals k, k+1
    assert min(gaps) > apart and min(neighbours) > next_apart


def _lab(colour: str, dichromat: list | None = None) -> np.ndarray:
    rgb = np.array(to_rgb(colour))
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    if dichromat is not None:
        lin = np.clip(np.array(dichromat) @ lin, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ lin
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


@pytest.mark.parametrize("n", [2, K, K + 1, 3 * K + 2])
def test_groups_of_a_storage_take_the_palette_in_lane_order(n):
    flat = torch.zeros(8 * n)
    views = {f"w{i}": flat[8 * i : 8 * (i + 1)] for i in range(n)}
    views["w1.tied"] = views["w1"]
    d = diagram(views, by="span", max_lanes=4 * n)
    lanes = [bar.color for bar in sorted(d.bars, key=lambda b: b.lane)]
    assert lanes == [palette_colour(i) for i in range(n)]
    assert len(set(lanes[:K])) == min(n, K)  # distinct within a storage of up to K groups
    assert d.bars_for("w1.tied")[0].color == lanes[1]


def test_neighbouring_lanes_differ_across_storages():
    layout = tv.analyze(mixed())
    d = diagram(layout, expand_simple=True, by="span")
    lanes = [bar.color for bar in sorted(d.bars, key=lambda b: b.lane)]
    assert len(lanes) == 15 - 1  # q and q.tied share a bar
    for at in range(len(lanes) - K + 1):
        assert len(set(lanes[at : at + K])) == K, at  # any K lanes in a row: K colours


FILES = [(9, False), (12, True), (13, False), (13, True)]


@pytest.mark.parametrize(("per_layer", "sized"), FILES, ids=[f"{n} per layer{', sized' * s}" for n, s in FILES])
def test_one_role_from_every_layer_gets_distinct_colours_in_a_file(per_layer, sized):
    layout = tv.analyze(one_file(layers=16, per_layer=per_layer, sized=sized))
    for role in ("q_proj", "k_proj", "down_proj", "post_norm"):
        d = diagram(layout, names=f"\\.{role}\\.", max_lanes=100)
        assert_k_in_a_row(d, 16)
    ordinals = colour_ordinals(layout).tolist()
    skip = per_layer % K == 0  # a layer of K groups: one ordinal skipped per layer, so roles step K + 1
    assert ordinals == [k + k // per_layer * skip for k in range(16 * per_layer)]


def test_one_role_from_every_layer_gets_distinct_colours_in_a_live_model():
    layout = tv.analyze(llama_like(layers=16))
    for role in ("q_proj", "k_proj", "down_proj", "post_norm"):
        assert_k_in_a_row(diagram(layout, names=f"\\.{role}\\.", expand_simple=True, max_lanes=100), 16)


def assert_k_in_a_row(d, n: int) -> None:
    colours = [bar.color for bar in sorted(d.bars, key=lambda b: b.lane)]
    assert len(colours) == n
    for at in range(n - K + 1):
        assert len(set(colours[at : at + K])) == K, at


def test_ordinals_follow_the_drawing_order():
    layout = tv.analyze(llama_like(layers=2))
    order = colour_ordinals(layout)
    assert sorted(order.tolist()) == list(range(len(order)))  # a numbering of the span groups
    d = diagram(layout, expand_simple=True, by="span", max_lanes=100)
    first = layout.group_index("span")
    lanes = sorted(d.bars, key=lambda b: b.lane)
    assert [int(order[first[layout.position(b.names[0])]]) for b in lanes] == list(range(len(lanes)))
    assert lanes[0].names == ("embed_tokens.weight", "lm_head.weight")  # the tied storage first
    assert colour_ordinals(layout) is order  # computed once per layout


# -- every renderer shows the Diagram's colour ---------------------------------------------------
def test_png_and_canvas_show_each_name_in_its_layout_colour():
    pytest.importorskip("anywidget")
    from tensorviz.explorer.payload import payload

    layout = tv.analyze(mixed())
    ref = reference(layout)
    for opts in ({"by": "span", "expand_simple": True}, {"by": "overlap", "names": "q|x|lone", "expand_simple": True}):
        d = diagram(layout, **opts)
        fig = render(d)
        try:
            png = {}
            for gid in ("spans", "footprints"):  # every bar's span; the bytes strided views read
                coll = layer(fig, gid)
                for face, owner in zip(coll.get_facecolors(), coll.tensorviz_owner):
                    for n in d.bars[owner].names:
                        assert png.setdefault(n, to_hex(face)) == to_hex(face), (gid, n)
        finally:
            fig.clear()
        p = payload(d, layout)
        index = np.frombuffer(p["bar_color"], "<u1")
        canvas = {n: p["colors"][index[i]] for i, bar in enumerate(d.bars) for n in bar.names}
        assert canvas == {n: ref[n] for n in canvas}
        assert png == {n: canvas[n] for n in png}
        assert set(canvas) - set(png) == ({"none"} if "none" in canvas else set())  # an empty view: a tick
        assert len(set(canvas.values())) > 5


LEGENDS = [
    ({"names": "lone", "expand_simple": True}, None),  # dense bars only: no key
    ({"names": "none"}, ["empty view (a tick at its offset)"]),
    ({"by": "span", "names": "^q"}, ["read by ≥2 bars (bar outlined)"]),
    (
        {"names": "^even$"},
        ["bytes read (exact)", "in span, not read", "read by ≥2 bars (bar outlined)", "non-contiguous"],
    ),
    (
        {},
        [
            "bytes read (exact)",
            "in span, not read",
            "read by ≥2 bars (bar outlined)",
            "non-contiguous",
            "empty view (a tick at its offset)",
        ],
    ),
]


@pytest.mark.parametrize(("opts", "entries"), LEGENDS, ids=[str(o) for o, _ in LEGENDS])
def test_the_legend_lists_only_the_marks_drawn(opts, entries):
    fig = render(diagram(tv.analyze(mixed()), **opts))
    try:
        legend = fig.axes[0].get_legend()
        assert (legend and [t.get_text() for t in legend.get_texts()]) == entries
    finally:
        fig.clear()
