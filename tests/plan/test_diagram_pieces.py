"""The diagram draws a logical tensor's stored pieces as one group (issue 26).

A torchao ``Int8Tensor`` weight is three storages (qdata, scale, zero_point); a bitsandbytes
``Params4bit`` weight six. The planner puts each logical tensor's storages next to each other
and records a :class:`~tensorviz.plan.model.LogicalGroup` (its lanes and a label with each
piece's bytes, checked against the inner tensors' own ``nbytes``); matplotlib draws a band
behind exactly those lanes and the label at the right end of the last one; the text lane map
puts the label above the group.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core.units import format_bytes
from tensorviz.plan.model import LogicalGroup
from tensorviz.render.mpl import drawn_rects, render, texts

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
torchao_q = pytest.importorskip("torchao.quantization")


def _int8_model() -> torch.nn.Sequential:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32))
    torchao_q.quantize_(m, torchao_q.Int8WeightOnlyConfig())
    return m


def _label(name: str, w: torch.Tensor) -> str:
    """The label written out from torch's own numbers (nbytes of each inner tensor)."""
    q, s, z = w.qdata, w.scale, w.zero_point
    stored = q.untyped_storage().nbytes() + s.untyped_storage().nbytes() + z.untyped_storage().nbytes()
    rows, cols = w.shape
    return (
        f"{name} Int8Tensor {rows}×{cols}: int8 qdata {format_bytes(q.nbytes)} + float32 scale "
        f"{format_bytes(s.nbytes)} + int8 zero_point {format_bytes(z.nbytes)} = "
        f"{format_bytes(stored)} stored, {format_bytes(w.numel() * 4)} as float32"
    )


def test_int8_weights_are_one_group_each_with_their_bytes():
    m = _int8_model()
    d = tv.diagram(m)
    assert [lane.label for lane in d.lanes] == [
        "0.weight.qdata", "0.weight.scale", "0.weight.zero_point",
        "1.weight.qdata", "1.weight.scale", "1.weight.zero_point",
        "0.bias", "1.bias",
    ]  # fmt: skip
    assert d.logical == (
        LogicalGroup("0.weight", _label("0.weight", m[0].weight), (0, 2), ("0.weight.qdata", "0.weight.scale", "0.weight.zero_point")),
        LogicalGroup("1.weight", _label("1.weight", m[1].weight), (3, 5), ("1.weight.qdata", "1.weight.scale", "1.weight.zero_point")),
    )  # fmt: skip
    assert d.logical[0].label == (
        "0.weight Int8Tensor 64×64: int8 qdata 4.0 KiB + float32 scale 256 B + int8 zero_point 64 B"
        " = 4.3 KiB stored, 16.0 KiB as float32"
    )


def test_the_band_covers_exactly_the_groups_lanes_and_the_label_sits_on_its_last():
    d = tv.diagram(_int8_model())
    fig = render(d)
    rects = drawn_rects(fig, "logical-groups")
    lo, hi = d.x_range
    assert (lo, hi) == (0, 4096)
    assert np.array_equal(
        np.sort(rects, axis=1),
        np.sort(np.array([[[0, -0.5], [0, 2.5], [4096, 2.5], [4096, -0.5]], [[0, 2.5], [0, 5.5], [4096, 5.5], [4096, 2.5]]], float), axis=1),
    )  # fmt: skip
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_gid() == "logical-label"]
    assert [t.get_text().strip() for t in labels] == [g.label for g in d.logical]
    assert [t.get_position() for t in labels] == [(4096, 2), (4096, 5)]
    assert texts(fig, "lane-label")[:3] == ["0.weight.qdata", "0.weight.scale", "0.weight.zero_point"]


def test_text_lane_map_names_the_group_above_its_pieces():
    d = tv.diagram(_int8_model())
    lines = d.to_text(width=16).splitlines()
    at = lines.index(f"logical {d.logical[0].label}")
    assert lines[at + 1].startswith("storage #0 · 4.0 KiB") and "0.weight.qdata" in lines[at + 2]
    assert lines[at + 3].startswith("storage #1 · 256 B")


def test_no_group_when_pieces_are_shared_or_filtered_out():
    m = _int8_model()
    w = m[0].weight
    tied = tv.diagram({"embed.weight": w, "lm_head.weight": w})  # each storage holds two logical tensors' pieces
    assert tied.logical == ()
    only_q = tv.diagram(m, names=r"\.qdata$")  # the other pieces are not drawn
    assert only_q.logical == () and [lane.label for lane in only_q.lanes] == ["0.weight.qdata", "1.weight.qdata"]
    assert tv.diagram({"a": torch.zeros(3)}).logical == ()


def test_bitsandbytes_params4bit_pieces_are_one_group():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    m = torch.nn.Sequential(bnb.nn.Linear4bit(64, 32, quant_type="nf4", compress_statistics=True)).to("cpu")
    d = tv.diagram(m)
    (g,) = d.logical
    parts = ("weight", "weight.absmax", "weight.quant_map", "weight.nested_absmax", "weight.nested_quant_map")
    assert set(g.pieces) == {f"0.{p}" for p in parts} | {"0.weight.quant_state.bitsandbytes__nf4"}
    assert g.lanes == (0, 5) and [lane.label for lane in d.lanes][6:] == ["0.bias"]
    qs = m[0].weight.quant_state
    assert g.label.startswith(
        f"0.weight Params4bit nf4 32×64: uint8 packed {format_bytes(m[0].weight.nbytes)} + uint8 absmax "
        f"{format_bytes(qs.absmax.nbytes)} + float32 quant_map {format_bytes(qs.code.nbytes)}"
    )
