"""FSDP2's physical side in tv.analyze(model, group=...): sharded storages, all-gathers, what is freed.

Cheap first: the totals and the peak rule on hand-made units, the text, the exchange's device
choice; then the spawned gloo runs of tests/helpers/dist_worker.py (world sizes 2 and 4): a real
forward + backward of the tied-embedding transformer with ``reshard_after_forward`` True and
False, every number checked against FSDP2 itself -- the storages the forward computed with (a
forward pre-hook runs after FSDP2's all-gather), ``to_local()``'s storage -- and against the
padding arithmetic (``ceil(rows / world)`` rows a rank).
"""

from __future__ import annotations

import json
import os

import pytest

import tensorviz as tv
from tensorviz.core.errors import TensorvizError
from tensorviz.core.fsdp import PEAK_RULE, fsdp_lines, rank_rows, rank_totals
from tensorviz.savecheck.outcomes import FSDP_MID_STEP
from tensorviz.sources.distributed.collective import layout_from_record, object_device
from tensorviz.sources.distributed.fsdp_facts import fsdp_record, rank_record
from tests.helpers.dist_runs import rank_results, worker_run

# -- pure: totals, the peak rule, words -------------------------------------------------------------


def _unit(module, raf, gathered, now, storages, world=2):
    params = [
        {
            "names": [f"{module}.p{i}"],
            "storage": i,
            "offset": 0,
            "padded": s,
            "gathered": g,
            "now": n,
            "dtype": "float32",
        }
        for i, (g, n, s) in enumerate(zip(gathered, now, storages))
    ]
    return {"module": module, "state": "sharded", "reshard_after_forward": raf, "note": "", "world": world,
            "storages": list(storages), "params": params}  # fmt: skip


def test_rank_totals_follow_the_peak_rule():
    units = [
        _unit("a", False, [100, 20], [100, 20], [50, 10]),  # kept gathered: 120 after forward
        _unit("b", True, [300], [0], [150]),  # freed after forward: re-gathered in backward
        _unit("c", True, [200], [0], [100]),
        _unit("d", True, [400], [None], [200]),  # never gathered yet
        _unit("e", 4, [80], [0], [40]),  # kept as a 1/4 shard: 20 after forward; re-gathered too
    ]
    t = rank_totals(units, [55, 140, 100, 190, 40])
    assert t == {
        "units": 5,
        "sharded_bytes": 550,
        "shard_bytes": 525,
        "padding_bytes": 25,
        "unsharded_bytes": 1100,
        "gathered_now_bytes": 120,
        "freed_bytes": 580,
        "freed_storages": 3,
        "peak_bytes": 550 + 120 + 20 + 400 + 300,  # resident + kept + two largest re-gathered
    }


def test_record_merges_equal_ranks_in_text_and_names_unreadable_ranks():
    units = [_unit("", False, [288], [0], [144]), _unit("blocks.0", True, [432, 24], [0, 0], [216, 12])]
    record = fsdp_record([([1, 0], units)], {0: 372, 1: 336}, {2: "torch 9 has no X"})
    assert list(record["ranks"]) == [0, 1] and record["unavailable"] == {"torch 9 has no X": [2]}
    lines = fsdp_lines(record)
    assert lines[0] == (
        "FSDP2 rank 0: sharded storages 372 B (shards 372 B + padding 0 B) · all-gathers 744 B · gathered now 0 B · "
        "freed 744 B (3 storages) · peak ≈ 1.1 KiB"
    )
    assert lines[1].startswith("FSDP2 rank 1: sharded storages 372 B (shards 336 B + padding 36 B)")
    assert lines[2:] == [
        "FSDP2 rank 2: torch 9 has no X",
        "FSDP2 units on ranks 0-1: 2",
        "unit (root): 1 param in 1 sharded storage (144 B a rank, padded), all-gather 288 B over 2 ranks, "
        "kept gathered after forward; now sharded, 1 unsharded storage freed",
        "unit blocks.0: 2 params in 2 sharded storages (228 B a rank, padded), all-gather 456 B over 2 ranks, "
        "freed after forward (re-gathered in backward); now sharded, 2 unsharded storages freed",
        PEAK_RULE,
    ]
    assert rank_rows(record)[1] == ("1", "372 B", "36 B", "744 B", "0 B", "744 B (3)", "1.1 KiB")
    assert fsdp_record([([0, 1], [])], {}, {}) is None
    # two descriptions (FSDP2 over tensor parallelism: a dp mesh per tp column) with the same units
    merged = fsdp_record([([0, 2], units), ([1, 3], [dict(u) for u in units])], {}, {})
    assert [e["ranks"] for e in merged["units"]] == [[0, 1, 2, 3]] and list(merged["ranks"]) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("backend", "current", "count", "local_rank", "device"),
    [
        ("gloo", 0, 0, None, "cpu"),
        ("nccl", 3, 8, "3", "cuda:3"),
        ("nccl", 0, 1, "5", "cuda:0"),  # one GPU visible a process (CUDA_VISIBLE_DEVICES)
        ("nccl", 2, 4, "6", "cuda:2"),  # LOCAL_RANK mod the visible GPUs
        ("cpu:gloo,cuda:nccl", 0, 8, "3", "cpu"),  # torch sends objects over the cpu backend
        ("cuda:nccl", 1, 2, None, "cuda:1"),
        ("xccl", 0, 0, None, "xpu"),
    ],
)
def test_object_device_is_what_torch_uses_for_each_backend(backend, current, count, local_rank, device):
    assert object_device(backend, current, count, local_rank) == device


def test_object_device_refuses_ranks_sharing_one_gpu():
    with pytest.raises(TensorvizError, match=r"cuda:0, but LOCAL_RANK=3 with 8 GPUs.*torch.cuda.set_device"):
        object_device("nccl", 0, 8, "3")


def test_a_torch_without_fsdp2s_private_attributes_gets_the_reason_not_an_error():
    import types

    import torch

    from tensorviz.sources.distributed.fsdp_units import UNAVAILABLE, describe_units, read_units

    class Unknown(torch.nn.Module):  # an FSDP2 state with neither _fsdp_param_groups nor _fsdp_param_group
        def _get_fsdp_state(self):
            return types.SimpleNamespace()

    m = Unknown()
    why = UNAVAILABLE.format(version=torch.__version__, what="SimpleNamespace._fsdp_param_group")
    assert read_units(m, [("", m)]) == ([], [], why)
    assert "torch " + torch.__version__ + " has no SimpleNamespace._fsdp_param_group" in why
    record = fsdp_record([([0], [])], {}, {0: why})
    assert fsdp_lines(record) == [f"FSDP2 rank 0: {why}"]
    assert describe_units(torch.nn.Linear(2, 2)) == ([], [], None)
    assert "fsdp" not in tv.analyze(torch.nn.Linear(2, 2)).metadata


# -- real runs: a training step on 2 and 4 ranks --------------------------------------------------------
ROWS = {  # global rows and bytes a row of every parameter of tests/helpers/dist_worker.py's TinyLM
    "embed.weight": (11, 24),
    **{
        f"blocks.{b}.{n}": shape
        for b in (0, 1)
        for n, shape in {
            "norm.weight": (6, 4),
            "norm.bias": (6, 4),
            "qkv.weight": (18, 24),
            "qkv.bias": (18, 4),
            "proj.weight": (6, 24),
            "proj.bias": (6, 4),
            "up.weight": (10, 24),
            "up.bias": (10, 4),
            "down.weight": (6, 40),
            "down.bias": (6, 4),
        }.items()
    },
}


def _padded(name, world):
    rows, row = ROWS[name]
    return -(-rows // world) * row


def _local(name, world, rank):
    rows, row = ROWS[name]
    size = -(-rows // world)
    return max(0, min(size, rows - rank * size)) * row


def _params(fsdp):
    (entry,) = fsdp["units"]
    return {p["names"][0]: (u, p) for u in entry["units"] for p in u["params"]}


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("name", ["step_reshard", "step_keep"])
def test_after_a_step_every_unsharded_storage_is_freed_with_fsdp2s_sizes(world, name):
    runs = rank_results(world, name)
    fsdp = runs[0]["layout"]["metadata"]["fsdp"]
    assert all(r["layout"]["metadata"]["fsdp"] == fsdp for r in runs)
    assert fsdp["units"][0]["ranks"] == list(range(world))
    raf = name == "step_reshard"
    units = fsdp["units"][0]["units"]
    assert [(u["module"], u["reshard_after_forward"], u["world"], u["state"]) for u in units] == [
        (m, raf, world, "sharded") for m in ("", "blocks.0", "blocks.1")
    ]
    params = _params(fsdp)
    assert set(params) == set(ROWS)
    assert params["embed.weight"][1]["names"] == ["embed.weight", "head.weight"]  # the tie: one storage
    for run in runs:  # each rank's own truth
        truth = run["truth"]
        for n, (unit, p) in params.items():
            # padded shard bytes: to_local()'s storage, as FSDP2 allocated it, and the arithmetic
            assert p["padded"] == truth["local"][n] == _padded(n, world) == unit["storages"][p["storage"]], n
            assert p["offset"] == 0
            # what the all-gather re-gathers: the storage the forward computed with (padded)
            assert p["gathered"] == truth["during_forward"][n] == _padded(n, world) * world, n
            assert p["now"] == truth["after_step"][n] == 0, n  # freed between steps
    per_unit = [sum(p["gathered"] for p in u["params"]) for u in units]
    sharded = sum(_padded(n, world) for n in ROWS)
    for rank in range(world):
        t = fsdp["ranks"][str(rank)]
        shards = sum(_local(n, world, rank) for n in ROWS)
        peak = sharded + (sum(sorted(per_unit)[-2:]) if raf else sum(per_unit))
        assert t == {
            "units": 3,
            "sharded_bytes": sharded,
            "shard_bytes": shards,
            "padding_bytes": sharded - shards,
            "unsharded_bytes": sharded * world,
            "gathered_now_bytes": 0,
            "freed_bytes": sharded * world,
            "freed_storages": 21,
            "peak_bytes": peak,
        }, rank
    assert fsdp["ranks"][str(world - 1)]["padding_bytes"] > 0  # 11, 6, 18 and 10 rows do not divide evenly


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
def test_between_forward_and_backward_kept_units_are_gathered_and_analysis_reshards_nothing(world):
    runs = rank_results(world, "step_keep")
    for run in runs:
        truth = run["truth"]
        assert truth["still_gathered"] is True  # the model was left as the forward left it
        assert truth["states_kept"] is True  # by analyze, analyze(group=) and save_check alike
        check = truth["save_check_mid_step"]  # judged from the shards, state_dict() never called
        assert FSDP_MID_STEP in check["notes"]
        fsdp_ranks = truth["mid_step"]["metadata"]["fsdp"]["ranks"]
        padded = fsdp_ranks[str(runs.index(run))]["padding_bytes"] > 0
        assert check["verdicts"] == [  # torch.save pickles DTensors, whole (padded) storages; safetensors takes none
            ["safetensors.save_file", "could not evaluate"],
            ["safetensors.save_model", "could not evaluate"],
            ["torch.save", "writes unreferenced bytes" if padded else "ok"],
            ["accelerate.save", "could not evaluate"],
        ]
        assert truth["save_check_torch_save_nbytes"] == truth["torch_save_nbytes"]  # as a real save
        mid = truth["mid_step"]
        # the global layout is the same as between steps: the shards are read, not the gathered copies
        assert [(v["name"], v["start"], v["stop"]) for v in mid["views"]] == [
            (v["name"], v["start"], v["stop"]) for v in run["layout"]["views"]
        ]
        fsdp = mid["metadata"]["fsdp"]
        for n, (unit, p) in _params(fsdp).items():
            assert unit["state"] == "unsharded"
            assert p["now"] == p["gathered"] == truth["during_forward"][n], n
        t = fsdp["ranks"]["0"]
        assert (t["gathered_now_bytes"], t["freed_bytes"]) == (t["unsharded_bytes"], 0)
        # tv.analyze(model) on one rank: its local shards, and the same units for this rank alone
        local = truth["local_mid_step"]
        rank = runs.index(run)
        assert local["metadata"]["fsdp"]["units"] == [{"ranks": [rank], "units": fsdp["units"][0]["units"]}]
        assert local["metadata"]["fsdp"]["ranks"] == {str(rank): fsdp["ranks"][str(rank)]}
        views = {v["name"]: v for v in local["views"]}
        assert views["embed.weight"]["nbytes"] == _local("embed.weight", world, rank)
        assert "DTensor" in views["embed.weight"]["note"]


def _layout(world, name):
    with open(os.path.join(worker_run(world), f"{name}.exchange.json")) as f:
        return layout_from_record(json.load(f))


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
def test_each_rank_sends_one_number_and_the_units_travel_once(world):
    with open(os.path.join(worker_run(world), "step_reshard.exchange.json")) as f:
        record = json.load(f)
    for rank in range(world):  # the all-gathered facts: O(1) a rank, whatever the number of units
        facts = record["per_rank"][str(rank)]
        assert set(facts) == {"local_bytes", "storage_bytes", "problems", "fsdp_shard_bytes"}
        assert facts["fsdp_shard_bytes"] == sum(_local(n, world, rank) for n in ROWS)
    ((ranks, desc),) = record["shared"]  # one description, with the units, broadcast once
    assert ranks == list(range(world)) and len(desc["fsdp"]) == 3


@pytest.mark.spawn
@pytest.mark.parametrize("world", [2, 4])
def test_rank_record_places_each_local_shard_in_its_padded_storage(world):
    layout = _layout(world, "step_reshard")
    for rank in range(world):
        units = rank_record(layout, rank)
        assert [u["module"] for u in units] == ["", "blocks.0", "blocks.1"]
        for u in units:
            for storage in u["storages"]:
                ((shard),) = storage["shards"]  # FSDP2: one storage a parameter
                n = shard["names"][0]
                assert storage["nbytes"] == _padded(n, world)
                assert (shard["start"], shard["stop"]) == (0, _local(n, world, rank)), (rank, n)
            assert {x["state"] for x in u["unsharded"]} == {"freed"}
    with pytest.raises(KeyError, match=r"rank 9 holds no FSDP2 unit; ranks with units: \[0, 1"):
        rank_record(layout, 9)


@pytest.mark.spawn
def test_before_the_first_forward_nothing_is_gathered_and_the_root_is_kept():
    layout = _layout(2, "fsdp")  # fully_shard with the default reshard_after_forward=None
    units = rank_record(layout, 1)
    assert [(u["module"], u["reshard_after_forward"]) for u in units] == [
        ("", False),
        ("blocks.0", True),
        ("blocks.1", True),
    ]
    assert units[0]["note"].startswith("root: kept gathered after forward")
    assert {x["state"] for u in units for x in u["unsharded"]} == {"not yet gathered"}
    t = layout.metadata["fsdp"]["ranks"][1]
    sharded = sum(_padded(n, 2) for n in ROWS)
    # the root (embedding, 288 B gathered) is kept; the two blocks are the two largest re-gathered
    assert t["peak_bytes"] == sharded + 288 + 2 * (sharded - 144) and t["gathered_now_bytes"] == 0


@pytest.mark.spawn
def test_text_and_html_show_the_physical_side():
    layout = _layout(4, "step_reshard")
    text = layout.to_text(full=True)
    # 4 ranks: blocks.0 pads 2, 2, 5, 5, 2, 2, 3, 3, 2, 2 rows of 4, 4, 24, 4, 24, 4, 24, 4, 40, 4 bytes: 384 B
    assert (
        "  unit blocks.0: 10 params in 10 sharded storages (384 B a rank, padded), all-gather 1.5 KiB over 4 "
        "ranks, freed after forward (re-gathered in backward); now sharded, 10 unsharded storages freed\n" in text
    )
    sharded = sum(_padded(n, 4) for n in ROWS)
    shards = sum(_local(n, 4, 3) for n in ROWS)
    assert (sharded, shards) == (840, 272)
    assert "  FSDP2 ranks 0-2: sharded storages 840 B (shards 840 B + padding 0 B) · all-gathers 3.3 KiB" in text
    assert "  FSDP2 rank 3: sharded storages 840 B (shards 272 B + padding 568 B)" in text
    assert "FSDP2 ranks 0-2: sharded storages 840 B" in layout.to_text()  # the compact summary too
    html = tv.show(layout, max_lanes=8).to_html()
    table = html[html.index("FSDP2 per rank") :]
    assert table.count("<tr>") == 1 + 4  # the heading and one row a rank
    assert "<td" in table and "568 B" in table and "peak ≈ every unit&#x27;s sharded storages" in table


def test_html_escapes_the_fsdp_table():
    from tensorviz.render.html.diagram import fsdp_html

    record = fsdp_record([([0], [_unit("<b>", True, [8], [0], [4])])], {0: 4}, {})
    record["peak_rule"] = "<script>x</script>"
    out = fsdp_html(record)
    assert "<script>" not in out and "&lt;script&gt;x&lt;/script&gt;" in out
    assert fsdp_html(None) == ""


@pytest.mark.spawn
def test_reshard_after_forward_to_a_smaller_mesh_keeps_half_and_analysis_changes_nothing():
    """reshard_after_forward=2 on 4 ranks: after forward each unit keeps a 1/2 shard (FSDP2's
    post-forward state), the gathered outputs are freed; analysing then leaves every parameter
    object and storage as it was."""
    runs = rank_results(4, "step_partial")
    for rank, run in enumerate(runs):
        truth = run["truth"]
        assert truth["states_kept"] is True and truth["still_gathered"] is False
        mid = truth["mid_step"]["metadata"]["fsdp"]
        assert [(u["state"], u["reshard_after_forward"]) for u in mid["units"][0]["units"]] == [
            ("sharded post forward", 2)
        ] * 3
        per_unit = [sum(p["gathered"] for p in u["params"]) for u in mid["units"][0]["units"]]
        sharded = sum(_padded(n, 4) for n in ROWS)
        assert sum(per_unit) == 4 * sharded
        t = mid["ranks"][str(rank)]
        assert (t["gathered_now_bytes"], t["freed_bytes"]) == (0, 4 * sharded)
        assert t["peak_bytes"] == sharded + sum(g // 2 for g in per_unit) + sum(sorted(per_unit)[-2:])
        assert [(v["name"], v["start"], v["stop"]) for v in truth["mid_step"]["views"]] == [
            (v["name"], v["start"], v["stop"]) for v in run["layout"]["views"]
        ]


@pytest.mark.spawn
def test_hsdp_gathers_over_the_shard_dimension_only():
    """HSDP on a 2 x 2 (replicate, shard) mesh: the all-gather runs over "shard" (2 ranks), so a
    unit re-gathers padded shard bytes x 2, not x 4; the replicas hold the same padded storages."""
    fsdp = rank_results(4, "hsdp")[0]["layout"]["metadata"]["fsdp"]
    ((unit,),) = [e["units"] for e in fsdp["units"]]  # one unit: fully_shard on the root only
    assert fsdp["units"][0]["ranks"] == [0, 1, 2, 3] and unit["world"] == 2
    assert unit["reshard_after_forward"] is False and unit["note"].startswith("root:")
    for p in unit["params"]:
        n = p["names"][0]
        assert (p["padded"], p["gathered"], p["now"]) == (_padded(n, 2), 2 * _padded(n, 2), None), n
    for rank in range(4):
        shards = sum(_local(n, 2, rank % 2) for n in ROWS)
        assert fsdp["ranks"][str(rank)]["shard_bytes"] == shards
