"""``dcp.load``'s load plan drawn on the checkpoint's global layout (``tv.load_plan``).

The plan comes from each loader's ``tv.load_check(..., loader="dcp.load")``; every read it draws
is checked against the real ``dcp.load``'s reads (a ``FileSystemReader`` that notes each chunk it
is asked to read): here two loads of one checkpoint in this process (the whole state dict, and
only ``b``), and in the spawned 4-rank gloo run of ``test_loadcheck_dcp`` (:func:`check_plan4`).
Drawn coordinates are asserted exactly: each strip's byte range and its slot of the bar.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import tensorviz as tv
from tensorviz.core.errors import OptionError
from tensorviz.render.loadplan import BAND, rank_words
from tensorviz.render.mpl import BAR_HEIGHT, drawn_rects, layer, texts
from tests.helpers.dcp_load_worker import Recording

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _folder(tmp_path) -> str:
    import torch.distributed.checkpoint as dcp

    folder = str(tmp_path / "ckpt")
    dcp.save({"w": torch.arange(12.0).reshape(3, 4), "b": torch.ones(3)}, checkpoint_id=folder)
    return folder


def _real_reads(target: dict, folder: str) -> list:
    import torch.distributed.checkpoint as dcp

    reader = Recording(folder)
    dcp.load(target, storage_reader=reader)
    return sorted((r[3], r[4], r[5]) for r in reader.seen)


def test_two_loads_of_one_checkpoint(tmp_path) -> None:
    folder = _folder(tmp_path)
    targets = [{"w": torch.zeros(3, 4), "b": torch.zeros(3)}, {"b": torch.zeros(3).bfloat16()}]
    reports = [tv.load_check(t, folder, loader="dcp.load") for t in targets]
    p = tv.load_plan(reports)
    for rank, t in enumerate(targets):  # the plan's reads are the real loads' reads
        assert sorted((r.file, r.offset, r.length) for r in p.plan.reads if r.rank == rank) == _real_reads(t, folder)
    chunks = tv.analyze(folder).facts.chunks
    w, b = chunks["w[0:3, 0:4]"], chunks["b[0:3]"]
    assert [(r.rank, r.files, r.nbytes, r.chunks) for r in p.rows()] == [
        (0, ("__0_0.distcp",), w["length"] + b["length"], 2),
        (1, ("__0_0.distcp",), b["length"], 1),
    ]
    assert str(p).splitlines()[1:] == [
        "rank  files         bytes    chunks",
        f"   0  __0_0.distcp  {tv.core.units.format_bytes(w['length'] + b['length']):<8}      2",
        f"   1  __0_0.distcp  {tv.core.units.format_bytes(b['length']):<8}      1",
    ]
    fig = p.figure()
    assert texts(fig, "lane-label") == [
        "storage #2 · __0_0.distcp · 3.1 KiB",
        "__0_0.distcp:w[0:3, 0:4]",
        "__0_0.distcp:b[0:3]",
        "w[0:3, 0:4]",
        "b[0:3]",
    ]
    assert (BAR_HEIGHT, BAND) == (0.72, 0.75)  # a bar spans lane ± 0.36; the strips its lower 0.54, 0.27 a rank
    wx, bx = (w["offset"], w["offset"] + w["length"]), (b["offset"], b["offset"] + b["length"])
    want = [  # (x0, x1, y0, y1) per strip: bars in lane order, ranks ascending
        (*wx, 0.82, 1.09),  # lane 1, rank 0
        (*bx, 1.82, 2.09),  # lane 2, rank 0
        (*bx, 2.09, 2.36),  # lane 2, rank 1
        (0, 48, 2.82, 3.09),  # w: 12 float32, rank 0
        (0, 12, 3.82, 4.09),  # b: 3 float32, ranks 0 and 1
        (0, 12, 4.09, 4.36),
    ]
    rects = drawn_rects(fig, "load-plan")
    got = [(r[:, 0].min(), r[:, 0].max(), r[:, 1].min(), r[:, 1].max()) for r in rects]
    np.testing.assert_allclose(np.array(got), np.array(want, dtype=float), atol=1e-9)
    assert layer(fig, "load-plan").tensorviz_rank.tolist() == [0, 0, 1, 0, 0, 1]
    assert layer(fig, "load-plan").get_facecolors()[:, :3].round(4).tolist() == [
        list(np.round(__import__("matplotlib").colors.to_rgb(tv.plan.colors.palette_colour(r)), 4))
        for r in (0, 0, 1, 0, 0, 1)
    ]
    assert texts(fig, "load-plan-readers") == ["read by r0", "read by r0 r1", "read by r0", "read by r0 r1"]
    assert texts(fig, "load-plan-key") == ["r0", "r1"]
    row1 = f"r1</td><td><code>__0_0.distcp</code></td><td>1.5 KiB ({b['length']:,} B)</td><td>1</td></tr>"
    assert row1 in p._repr_html_() and b["length"] > 1024


def test_rank_words_and_bad_input(tmp_path) -> None:
    assert rank_words([3, 0, 1, 2, 6]) == "r0–r3 r6"
    assert rank_words([1, 2]) == "r1 r2"
    with pytest.raises(OptionError, match="needs one dcp.load report per rank"):
        tv.load_plan([])
    r = tv.load_check(torch.nn.Linear(2, 2), {"weight": torch.zeros(2, 2), "bias": torch.zeros(2)})
    with pytest.raises(OptionError, match="report 0 is of 'load_state_dict', not of loader='dcp.load'"):
        tv.load_plan([r])


def check_plan4(out: str, docs: list[dict]) -> None:
    """The 4-rank gloo run's plan (drawn by rank 0 from every rank's gathered report) against
    each rank's real reads."""
    with open(os.path.join(out, "plan4.json")) as f:
        plan = json.load(f)
    real = sorted([rank, *r[3:6]] for rank, doc in enumerate(docs) for r in doc["real"])
    assert sorted([r[0], r[2], r[3], r[4]] for r in plan["reads"]) == real
    rows = []
    for rank in range(4):
        chunks = {tuple(r[1:]) for r in real if r[0] == rank}
        rows.append([rank, sorted({c[0] for c in chunks}), sum(c[2] for c in chunks), len(chunks)])
    assert plan["rows"] == rows
    assert [r[1] for r in plan["rows"]] == [["__0_0.distcp", "__1_0.distcp"]] * 3 + [["__1_0.distcp"]]
    # w is sharded by columns over 4 ranks (2, 2, 2, 0): ranks 0-2 read both saved row chunks
    by_name = {}
    for names, rank, rect in zip(plan["strip_names"], plan["strip_ranks"], plan["strips"]):
        by_name.setdefault(names[0], []).append((rank, rect))
    assert [r for r, _ in by_name["w[0:4, 0:6]"]] == [0, 1, 2] and [r for r, _ in by_name["b[4:8]"]] == [2, 3]
    top, slot = BAR_HEIGHT / 2 - BAND * BAR_HEIGHT, BAND * BAR_HEIGHT / 4
    for name, strips in by_name.items():  # rank r's strip: slot r of the bar's lower band, one lane per name
        lanes = set()
        for rank, rect in strips:
            y0, y1 = min(v[1] for v in rect), max(v[1] for v in rect)
            assert round(y1 - y0, 6) == round(slot, 6), name
            lanes.add(round(y0 - top - rank * slot, 6))
        assert len(lanes) == 1 and float(lanes.pop()).is_integer(), name
    assert plan["readers"] == [
        "read by r0–r2", "read by r2 r3", "read by r0–r3", "read by r0–r2", "read by r0 r1",
        "read by r0–r2", "read by r0–r2", "read by r0 r1", "read by r2 r3", "read by r0–r3",
    ]  # fmt: skip
