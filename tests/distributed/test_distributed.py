"""tv.analyze(obj, group=...): DTensor placements, the global layout, and real spawned runs (gloo).

Cheap first: the placement arithmetic against DTensor's own splitting, the pure layout builder;
then one spawned run per world size (2 and 4; tests/helpers/dist_worker.py) in which every rank checks
its own shards against ``to_local()`` and ``full_tensor()``.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
import torch

import tensorviz as tv
from tensorviz.cli import layout_to_json
from tensorviz.core.errors import TensorvizError
from tensorviz.plan.diagram import PALETTE
from tensorviz.sources.distributed.collective import build_layout, layout_from_record
from tensorviz.sources.distributed.placements import coordinate, shard_ranges, shard_views
from tests.helpers.dist_runs import rank_results, worker_run

# -- placements: the arithmetic against DTensor's own split (its private helper is the oracle) -------


def _torch_split(length: int, placements: tuple, mesh: tuple, coord: tuple) -> list[int]:
    from torch.distributed.tensor.placement_types import Shard, _StridedShard

    t = torch.arange(length)
    for mesh_dim, p in enumerate(placements):
        if p[0] == "S":
            t = Shard(0)._split_tensor(t, mesh[mesh_dim], with_padding=False)[0][coord[mesh_dim]]
        elif p[0] == "SS":
            split = _StridedShard(0, split_factor=p[2])
            t = split._split_tensor(t, mesh[mesh_dim], with_padding=False)[0][coord[mesh_dim]]
    return t.tolist()


@pytest.mark.parametrize("mesh", [(2,), (3,), (4,), (2, 2), (2, 3), (4, 2)])
def test_shard_ranges_match_dtensor_split(mesh):
    options = [("S", 0), ("R",), ("P", "sum"), ("SS", 0, 2), ("SS", 0, 3)]
    cases = 0
    for length in (0, 1, 3, 5, 7, 8, 12, 13):
        for placements in itertools.product(options, repeat=len(mesh)):
            for coord in itertools.product(*(range(n) for n in mesh)):
                (ranges,) = shard_ranges((length,), placements, mesh, coord)
                got = [i for a, b in ranges for i in range(a, b)]
                assert got == _torch_split(length, placements, mesh, coord), (length, placements, coord)
                cases += 1
    assert cases == 8 * len(options) ** len(mesh) * (mesh[0] * (mesh[1] if len(mesh) > 1 else 1))


def test_shard_views_contiguous_interleaved_irregular_and_empty():
    # rows 2..5 of an (8, 3) tensor: one view at offset 6
    assert shard_views((8, 3), ([(2, 5)], [(0, 3)])) == [((3, 3), (3, 1), 6)]
    # evenly spaced equal row ranges: one view, the dim split in two (pieces, rows)
    assert shard_views((8, 3), ([(1, 3), (5, 7)], [(0, 3)])) == [((2, 2, 3), (12, 3, 1), 3)]
    # unequal pieces: one view per block
    assert shard_views((8, 3), ([(0, 1), (4, 7)], [(0, 3)])) == [((1, 3), (3, 1), 0), ((3, 3), (3, 1), 12)]
    # an empty shard (4 ranks, 3 columns: rank 3 holds none)
    assert shard_views((2, 3), ([(0, 2)], [])) == [((2, 0), (3, 1), 0)]
    assert coordinate([0, 2, 1, 3], (2, 2), 2) == (0, 1)


# -- the pure builder: what every rank computes from the exchanged descriptions ----------------------
MESH_2X2 = ((2, 2), (0, 1, 2, 3), ("dp", "tp"))


def _layout(entries, meshes=(MESH_2X2,), ranks=(0, 1, 2, 3)):
    desc = {"meshes": list(meshes), "entries": list(entries)}
    facts = {r: {"local_bytes": 0, "storage_bytes": 0, "problems": []} for r in ranks}
    return build_layout([(list(ranks), desc)], facts, "test", {"world_size": len(ranks)})


def test_builder_places_fsdp_over_tp_shards_and_keeps_ties():
    w = ("d", ("emb.weight", "head.weight"), "float32", 4, (16, 8), 0, (("SS", 0, 2), ("S", 0)))
    b = ("d", ("bias",), "float32", 4, (8,), 0, (("S", 0), ("R",)))
    layout = _layout([w, b])
    # rank order is not row order: 0 -> rows 0-3, 2 -> rows 4-7, 1 -> rows 8-11, 3 -> rows 12-15
    assert [layout[f"emb.weight@rank{r}"].start for r in range(4)] == [0, 256, 128, 384]
    assert layout["emb.weight@rank2"].stop == 256 and layout["emb.weight@rank2"].shape == (4, 8)
    assert layout.relation("emb.weight@rank1", "head.weight@rank1") == "identical"
    assert layout.relation("emb.weight@rank0", "emb.weight@rank2") == "disjoint"
    # Replicate over tp: ranks 0 and 1 hold the same bytes; Shard over dp: 0 and 2 do not
    assert layout.relation("bias@rank0", "bias@rank1") == "identical"
    assert layout.relation("bias@rank0", "bias@rank2") == "disjoint"
    labels = ["emb.weight = head.weight · global 16×8", "bias · global 8"]
    assert [s.label for s in layout.storages] == labels
    assert len(layout) == 4 * 3  # a view per rank and name; the global tensors are storages
    assert layout.storages[0].device == "global" and layout.storages[0].nbytes == 512
    shard = {"tensor": "emb.weight", "rank": 2, "mesh": 0, "coord": [1, 0]}
    assert layout.metadata["shards"]["emb.weight@rank2"] == shard
    assert layout["emb.weight@rank2"].note == "(_S(0, 2), S(0)) on mesh dp=2 x tp=2, at (dp=1, tp=0)"
    assert layout.metadata["tensors"]["bias"]["placements"] == {"0": ["S(0)", "R"]}
    assert layout.facts.tensors["bias"]["placements"] == {"0": ["S(0)", "R"]} and layout.facts.world_size == 4
    assert layout.facts.other == {}  # every fact of a distributed layout is a typed field


def test_builder_partial_plain_and_interleaved():
    p = ("d", ("p",), "float32", 4, (3, 2), 0, (("P", "sum"), ("R",)))
    s = ("d", ("s",), "float16", 2, (8, 2), 0, (("SS", 0, 2), ("R",)))
    t = ("t", ("buf",), "int64", 8, (5,))
    layout = _layout([p, s, t])
    assert layout["p@rank3"].nbytes == 24 and "Partial(sum)" in layout["p@rank3"].note
    assert "sum over mesh dim dp" in layout["p@rank3"].note
    # one mesh dim of _StridedShard: rank (dp=1) holds rows 2-3 and 6-7, one strided view
    v = layout["s@rank2"]
    assert (v.shape, v.stride, v.offset, v.is_contiguous) == ((2, 2, 2), (8, 2, 1), 4, False)
    assert v.footprint_runs().tolist() == [[8, 16], [24, 32]]
    assert "interleaved" in v.note
    assert [layout[f"buf@rank{r}"].nbytes for r in range(4)] == [40] * 4
    assert layout.relation("buf@rank0", "buf@rank3") == "identical"


def test_builder_submeshes_union_and_disagreement():
    # FSDP on the dp sub-mesh of each tp column: ranks 0,2 and 1,3 describe different meshes
    col0 = ((2,), (0, 2), ("dp",))
    col1 = ((2,), (1, 3), ("dp",))
    e = ("d", ("w",), "float32", 4, (5, 2), 0, (("S", 0),))
    facts = {r: {"local_bytes": 0, "storage_bytes": 0, "problems": []} for r in range(4)}
    layout = build_layout(
        [([0, 2], {"meshes": [col0], "entries": [e]}), ([1, 3], {"meshes": [col1], "entries": [e]})], facts, "t", {}
    )
    assert [layout[f"w@rank{r}"].shape for r in range(4)] == [(3, 2), (3, 2), (2, 2), (2, 2)]
    assert layout.relation("w@rank0", "w@rank1") == "identical"
    bad = ("d", ("w",), "float32", 4, (6, 2), 0, (("S", 0),))
    with pytest.raises(TensorvizError, match=r"ranks disagree about 'w'.*ranks \[1, 3\]"):
        build_layout(
            [([0, 2], {"meshes": [col0], "entries": [e]}), ([1, 3], {"meshes": [col1], "entries": [bad]})],
            facts,
            "t",
            {},
        )


def test_builder_skips_a_non_tensor_once_and_lists_shown_ranks_in_order():
    col0, col1 = ((2,), (0, 2), ("dp",)), ((2,), (1, 3), ("dp",))
    e, x = ("d", ("w",), "float32", 4, (4,), 0, (("S", 0),)), ("x", "step", "not a tensor (int)")
    facts = {r: {"local_bytes": 0, "storage_bytes": 0, "problems": []} for r in range(4)}
    shared = [([0, 2], {"meshes": [col0], "entries": [e, x]}), ([1, 3], {"meshes": [col1], "entries": [e, x]})]
    layout = build_layout(shared, facts, "t", {})
    assert [(s.name, s.reason) for s in layout.skipped] == [("step", "not a tensor (int)")]
    assert layout.metadata["tensors"]["w"]["ranks"] == [0, 1, 2, 3]
    assert [v.name for v in layout.views] == ["w@rank0", "w@rank1", "w@rank2", "w@rank3"]


def test_builder_shows_only_the_ranks_asked_for():
    w = ("d", ("w",), "float32", 4, (16, 8), 0, (("SS", 0, 2), ("S", 0)))
    desc = {"meshes": [MESH_2X2], "entries": [w]}
    facts = {r: {"local_bytes": 0, "storage_bytes": 0, "problems": []} for r in range(4)}
    layout = build_layout([([0, 1, 2, 3], desc)], facts, "t", {}, ranks=[3, 1])
    assert [v.name for v in layout.views] == ["w@rank1", "w@rank3"]
    assert layout.storages[0].nbytes == 512 and layout.storages[0].unreferenced_nbytes == 256
    assert [layout["w@rank1"].start, layout["w@rank3"].start] == [256, 384]


def test_group_without_torch_distributed_says_how_to_start_it():
    with pytest.raises(TensorvizError, match="init_process_group"):
        tv.analyze({"w": torch.zeros(2)}, group=True)


# -- real runs: one spawn per world size, every rank checks its own shards ---------------------------
@pytest.mark.spawn
@pytest.mark.parametrize(
    ("world", "scenario"), [(2, "fsdp"), (2, "placements"), (4, "fsdp"), (4, "placements"), (4, "tp")]
)
def test_every_rank_gets_the_same_layout_and_its_shards_are_true(world, scenario):
    results = rank_results(world, scenario)
    expected = {"fsdp": 23, "hsdp": 23, "placements": 5 if world == 2 else 8, "tp": 4}[scenario]
    for rank, r in enumerate(results):
        assert r["failures"] == [], f"rank {rank}: {r['failures']}"
        assert r["checked"] == expected
        assert r["layout"] == results[0]["layout"], f"rank {rank}'s layout differs from rank 0's"
    meta = results[0]["layout"]["metadata"]
    assert meta["problems"] == [] and meta["world_size"] == world
    assert meta["exchange"]["distinct_descriptions"] == 1


@pytest.mark.spawn
@pytest.mark.parametrize(("world", "scenario"), [(2, "fsdp"), (4, "tp")])
def test_exchange_record_rebuilds_the_same_layout_after_json(world, scenario):
    with open(os.path.join(worker_run(world), f"{scenario}.exchange.json")) as f:
        record = json.load(f)
    rebuilt = layout_to_json(layout_from_record(record))
    assert rebuilt == rank_results(world, scenario)[0]["layout"]
    with pytest.raises(TensorvizError, match="not an exchange record"):
        layout_from_record({"shared": []})


def _views(world, scenario):
    return {v["name"]: v for v in rank_results(world, scenario)[0]["layout"]["views"]}


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
def test_fsdp_tied_embedding_is_one_global_tensor_with_uneven_shards(world):
    views = _views(world, "fsdp")
    doc = rank_results(world, "fsdp")[0]["layout"]
    for r in range(world):
        assert views[f"embed.weight@rank{r}"]["storage"] == views[f"head.weight@rank{r}"]["storage"]
    storage = doc["storages"][views["head.weight@rank0"]["storage_index"]]
    assert storage["key"] == ["global", "embed.weight"] and storage["nbytes"] == 11 * 6 * 4
    assert storage["label"] == "embed.weight = head.weight · global 11×6"
    rows = {2: [6, 5], 4: [3, 3, 3, 2]}[world]
    assert [views[f"embed.weight@rank{r}"]["shape"][0] for r in range(world)] == rows
    assert [views[f"head.weight@rank{r}"]["start"] for r in range(world)] == [sum(rows[:r]) * 24 for r in range(world)]
    # LayerNorm(6) over 4 ranks: 2, 2, 2 and an empty shard
    norm = [views[f"blocks.0.norm.weight@rank{r}"]["shape"] for r in range(world)]
    assert norm == ([[3], [3]] if world == 2 else [[2], [2], [2], [0]])
    # the plain buffer: each rank's own copy of the whole tensor
    assert [views[f"positions@rank{r}"]["start"] for r in range(world)] == [0] * world


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
def test_fsdp_padding_shows_in_each_ranks_storage_bytes(world):
    """FSDP2 pads every rank's shard to ceil(rows / world) rows; a short last shard is padded."""
    from tests.helpers import dist_worker

    params = list({id(p): p for p in dist_worker.TinyLM().parameters()}.values())
    ranks = rank_results(world, "fsdp")[0]["layout"]["metadata"]["ranks"]
    for r in range(world):
        local = padded = 20  # the plain buffer "positions": 5 float32, not sharded
        for p in params:
            rows, per_row = p.shape[0], p.numel() // p.shape[0] * 4
            size = -(-rows // world)
            local += max(0, min(size, rows - r * size)) * per_row
            padded += size * per_row
        assert ranks[str(r)] == {"local_bytes": local, "storage_bytes": padded}
    assert ranks[str(world - 1)]["local_bytes"] < ranks[str(world - 1)]["storage_bytes"]


@pytest.mark.spawn
def test_hsdp_replicates_over_one_mesh_dim_and_shards_over_the_other():
    views = _views(4, "hsdp")
    assert views["embed.weight@rank0"]["note"] == "(R, S(0)) on mesh replicate=2 x shard=2, at (replicate=0, shard=0)"
    # ranks 0 and 2 (shard=0) hold rows 0-5 of 11, ranks 1 and 3 rows 6-10
    assert [views[f"embed.weight@rank{r}"]["start"] for r in range(4)] == [0, 144, 0, 144]
    assert [views[f"head.weight@rank{r}"]["shape"] for r in range(4)] == [[6, 6], [5, 6], [6, 6], [5, 6]]


@pytest.mark.spawn
def test_analyze_over_a_subgroup_of_two_of_four_ranks():
    out = worker_run(4)
    docs = []
    for rank in (1, 3):
        with open(os.path.join(out, f"subgroup.rank{rank}.json")) as f:
            docs.append(json.load(f))
    assert docs[0] == docs[1]
    assert not os.path.exists(os.path.join(out, "subgroup.rank0.json"))
    views = {v["name"]: v for v in docs[0]["views"]}
    assert list(views) == ["buf@rank1", "buf@rank3", "x@rank1", "x@rank3"]
    assert [views["x@rank1"]["shape"], views["x@rank3"]["shape"], views["x@rank3"]["start"]] == [[3, 2], [2, 2], 24]
    assert docs[0]["metadata"]["world_size"] == 2
    assert docs[0]["metadata"]["meshes"] == [{"shape": [2], "ranks": [1, 3], "dim_names": ["dp"]}]


@pytest.mark.spawn
def test_tp_over_fsdp_on_2x2_mesh():
    views = _views(4, "tp")
    assert [views[f"0.weight@rank{r}"]["start"] for r in range(4)] == [0, 256, 128, 384]
    assert [views[f"2.weight@rank{r}"]["offset"] for r in range(4)] == [0, 8, 64, 72]
    assert views["2.weight@rank1"]["stride"] == [16, 1] and not views["2.weight@rank1"]["is_contiguous"]
    assert [views[f"2.bias@rank{r}"]["start"] for r in range(4)] == [0, 0, 16, 16]
    assert views["0.weight@rank2"]["note"] == "(_S(0, 2), S(0)) on mesh dp=2 x tp=2, at (dp=1, tp=0)"


@pytest.mark.spawn
def test_interleaved_and_2d_placements_on_4_ranks():
    views = _views(4, "placements")
    v = views["strided@rank1"]  # rows 4-7 and 20-23 of 32
    assert (v["shape"], v["stride"], v["offset"]) == ([2, 4, 2], [32, 2, 1], 8)
    assert [views[f"grid@rank{r}"]["shape"] for r in range(4)] == [[3, 3], [3, 3], [2, 3], [2, 3]]
    assert [views[f"hsdp@rank{r}"]["offset"] for r in range(4)] == [0, 10, 0, 10]
    assert [views[f"strided2d@rank{r}"]["offset"] for r in range(4)] == [0, 6, 3, 9]
    assert views["cols3@rank3"]["shape"] == [2, 0] and views["cols3@rank3"]["nbytes"] == 0


# -- "by rank" and "by mesh dimension": storage lanes, bars coloured by shard ---------------------------
def _tp_layout():
    w = ("d", ("w",), "float32", 4, (16, 8), 0, (("SS", 0, 2), ("S", 0)))
    b = ("d", ("b",), "float32", 4, (8,), 0, (("S", 0), ("R",)))
    return _layout([w, b])


@pytest.mark.parametrize(
    ("by", "key"), [("rank", lambda r: r), ("mesh:dp", lambda r: r // 2), ("mesh:tp", lambda r: r % 2)]
)
def test_diagram_colours_shards_by_rank_or_mesh_coordinate(by, key):
    d = tv.diagram(_tp_layout(), by=by)
    colours = {bar.names[0]: bar.color for bar in d.bars}
    assert len(colours) == 8
    for a, ca in colours.items():
        for b, cb in colours.items():
            ra, rb = int(a.split("@rank")[1]), int(b.split("@rank")[1])
            assert (ca == cb) == (key(ra) == key(rb)), (by, a, b)
        assert ca == PALETTE[key(int(a.split("@rank")[1]))]  # rank or coordinate r: palette colour r
    assert d.by == "storage" and d.options.color_by == by
    assert [lane.label for lane in d.lanes if lane.kind == "storage"][0].startswith("storage #0 · w · global 16×8")


@pytest.mark.parametrize("colour", ["rank", "mesh:dp", "mesh:tp"])
def test_color_by_is_its_own_option_and_by_still_accepts_the_older_spelling(colour):
    layout = _tp_layout()
    old, new = tv.diagram(layout, by=colour), tv.diagram(layout, color_by=colour)
    assert new.options == old.options and new.options.by == "storage" and new.options.color_by == colour
    assert [(b.names, b.color) for b in new.bars] == [(b.names, b.color) for b in old.bars]
    span = tv.diagram(layout, by="span", color_by=colour)  # a grouping and a colouring together
    assert span.options.by == "span" and span.options.color_by == colour
    with pytest.raises(tv.TensorvizError, match=r"color_by must be 'category', 'rank' or 'mesh:<dim>'"):
        tv.diagram(layout, color_by="span")
    with pytest.raises(tv.TensorvizError, match=r"contradicts it"):
        tv.diagram(layout, by="rank", color_by="mesh:dp")


def test_shard_groupings_say_when_they_do_not_apply():
    with pytest.raises(
        tv.TensorvizError, match=r"by='mesh:pp': no mesh dimension of that name; this layout has 'mesh:dp', 'mesh:tp'"
    ):
        tv.diagram(_tp_layout(), by="mesh:pp")
    with pytest.raises(tv.TensorvizError, match=r"by='rank' colours the shards .* this layout is not sharded"):
        tv.diagram({"a": torch.zeros(2)}, by="rank")
