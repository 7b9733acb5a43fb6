"""tv.load_check for torch.distributed.checkpoint.load: each scenario predicted, then really loaded.

The prediction runs DCP's own ``dcp.load`` on fake tensors with a reader that reads nothing. The
real load then fills NaN-initialised targets through a ``FileSystemReader`` that notes each chunk
it is asked to read. Prediction = reality on: raises or not and DCP's whole message, the chunks
read (target name, offsets, lengths, file, byte offset and length), every element read holding
the saved value cast to the target's dtype, what stays NaN (untouched tensors, uncovered
elements), and the casts (the target dtype differs from the saved one). A checkpoint saved by 2
ranks is loaded into 1 process here and into 4 ranks (gloo) in a spawned run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import tensorviz as tv
from tests.helpers.dcp_load_worker import Recording, full
from tests.helpers.dist_runs import run_ranks

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _save(sd: dict, folder: str) -> str:
    import torch.distributed.checkpoint as dcp

    dcp.save(sd, checkpoint_id=folder)
    return folder


def _model_sd() -> dict[str, torch.Tensor]:
    torch.manual_seed(3)
    return {k: v.detach().clone() for k, v in nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6)).state_dict().items()}


def _nan(sd: dict, **changes: Any) -> dict:
    out = {k: torch.full_like(v, float("nan")) for k, v in sd.items()}
    for k, v in changes.items():
        k = k.replace("__", ".")
        if v is None:
            out.pop(k)
        else:
            out[k] = v
    return out


def _two_ranks(tmp: str) -> str:
    """A checkpoint written by 2 gloo ranks (w and b sharded by rows), once per test session."""
    out = os.path.join(tmp, "two")
    run_ranks("dcp_load_worker", ["save", "2", out], out, 2, "done.save2", timeout=300)
    return os.path.join(out, "ckpt")


#: name -> (saved state dict, checkpoint factory (saved, tmp) -> folder, target factory, strict, state_dict_key)
SCENARIOS: dict[str, tuple[Callable[[], dict], Callable[[dict], dict], bool, str | None]] = {
    "same model": (_model_sd, lambda sd: _nan(sd), True, None),
    "fp32 checkpoint into bf16 targets": (
        _model_sd,
        lambda sd: {k: v.bfloat16() for k, v in _nan(sd).items()},
        True,
        None,
    ),
    "a key the checkpoint lacks raises": (_model_sd, lambda sd: _nan(sd, extra=torch.zeros(3)), True, None),
    "a key the checkpoint lacks, allow_partial_load": (
        _model_sd,
        lambda sd: _nan(sd, extra=torch.full((3,), float("nan"))),
        False,
        None,
    ),
    "a key only the checkpoint has": (_model_sd, lambda sd: _nan(sd, **{"1__bias": None}), True, None),
    "size mismatch raises": (_model_sd, lambda sd: _nan(sd, **{"0__weight": torch.zeros(6, 5)}), True, None),
    "nested under 'model'": (lambda: {"model": _model_sd()}, lambda sd: _nan(sd["model"]), True, "model"),
}


def _really_load(target: dict, folder: str, strict: bool, key: str | None) -> tuple[str | None, list]:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import DefaultLoadPlanner
    from torch.distributed.checkpoint.api import CheckpointException

    reader = Recording(folder)
    try:
        dcp.load(
            {key: target} if key else target,
            storage_reader=reader,
            planner=DefaultLoadPlanner(allow_partial_load=not strict),
        )
    except (Exception, CheckpointException) as err:  # noqa: BLE001
        return f"{type(err).__name__}: {err}", []
    return None, sorted(getattr(reader, "seen", []))


def _flat_saved(saved: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    out = {}
    for k, v in saved.items():
        out.update(_flat_saved(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _check(saved: dict, folder: str, target: dict, strict: bool, key: str | None) -> Any:
    objects = dict(target)
    before = {k: v.clone() for k, v in target.items()}
    r = tv.load_check(
        target, folder, loader="dcp.load", strict=strict, loader_kwargs={"state_dict_key": key} if key else None
    )
    assert all(
        target[k] is objects[k] and torch.equal(target[k].nan_to_num(7), v.nan_to_num(7)) for k, v in before.items()
    )
    error, seen = _really_load(target, folder, strict, key)
    assert (r.raises, r.error) == (error is not None, error)
    if error:
        return r
    predicted = sorted([c.name, list(c.dest_offsets), list(c.lengths), c.file, c.offset, c.length] for c in r.reads)
    assert predicted == seen  # DCP's flattened names ("model.0.weight") on both sides
    values = _flat_saved(saved)
    prefix = key + "." if key else ""
    for name, t in target.items():
        full_name = prefix + name
        nans = int(torch.isnan(t.float()).sum())
        if full_name in r.untouched:
            assert nans == t.numel()
        else:
            assert nans == dict(r.uncovered).get(full_name, 0)
            if nans == 0:
                assert torch.equal(t, values[full_name].to(t.dtype)), name
    assert {c[0] for c in r.cast} == {
        prefix + n for n, t in target.items() if prefix + n in values and values[prefix + n].dtype != t.dtype
    }
    return r


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_prediction_equals_the_real_dcp_load(name: str, tmp_path) -> None:
    make_saved, make_target, strict, key = SCENARIOS[name]
    saved = make_saved()
    folder = _save(saved, str(tmp_path / "ckpt"))
    _check(saved, folder, make_target(saved), strict, key)


def test_scenarios_are_not_vacuous(tmp_path) -> None:
    got = {}
    for i, (name, (make_saved, make_target, strict, key)) in enumerate(SCENARIOS.items()):
        saved = make_saved()
        got[name] = _check(saved, _save(saved, str(tmp_path / str(i))), make_target(saved), strict, key)
    assert got["same model"].clean and set(got["same model"].files_read) == {"__0_0.distcp"}
    assert {c[0] for c in got["fp32 checkpoint into bf16 targets"].narrowing} == {
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
    }
    lacks = got["a key the checkpoint lacks raises"]
    assert lacks.error.splitlines()[-1] == "RuntimeError: Missing key in checkpoint state_dict: extra."
    assert str(lacks).splitlines()[1] == "raises: RuntimeError: Missing key in checkpoint state_dict: extra."
    assert got["a key the checkpoint lacks, allow_partial_load"].untouched == ("extra",)
    assert (
        got["a key only the checkpoint has"].unexpected == ("1.bias",)
        and not got["a key only the checkpoint has"].raises
    )
    assert got["size mismatch raises"].mismatched == (("0.weight", (6, 5), (6, 4)),)


@pytest.mark.slow
@pytest.mark.spawn
def test_two_ranks_saved_loaded_into_one_process(tmp_path) -> None:
    """Resharding: each of w's and b's 2 saved chunks read from its own rank's file."""
    folder = _two_ranks(str(tmp_path))
    saved = full()
    target = {
        "w": torch.full((8, 6), float("nan")),
        "b": torch.full((8,), float("nan")).bfloat16(),
        "scale": torch.full((2,), float("nan")),
    }
    r = _check(saved, folder, target, True, None)
    assert sorted((c.name, c.dest_offsets, c.lengths, c.file) for c in r.reads) == [
        ("b", (0,), (4,), "__0_0.distcp"),
        ("b", (4,), (4,), "__1_0.distcp"),
        ("scale", (0,), (2,), "__1_0.distcp"),
        ("w", (0, 0), (4, 6), "__0_0.distcp"),
        ("w", (4, 0), (4, 6), "__1_0.distcp"),
    ]
    assert r.cast == (("b", "float32", "bfloat16"),)


@pytest.mark.slow
@pytest.mark.spawn
def test_two_ranks_saved_loaded_into_four(tmp_path) -> None:
    """4 gloo ranks, w sharded by columns: every rank predicts its own reads, then really loads."""
    folder = _two_ranks(str(tmp_path))
    out = os.path.dirname(folder)
    run_ranks("dcp_load_worker", ["load", "4", out], out, 4, "done.load4", timeout=400)
    docs = [json.load(open(os.path.join(out, f"load4.rank{r}.json"))) for r in range(4)]
    for rank, doc in enumerate(docs):
        assert doc["predicted"] == doc["real"] and not doc["raises"], rank
        assert doc["ok"] == {"w": True, "b": True, "scale": True}, rank
        assert doc["cast"] == [["b", "float32", "bfloat16"]]
        w = [(p[1], p[2], p[3]) for p in doc["predicted"] if p[0] == "w"]
        if rank < 3:  # 6 columns over 4 ranks: 2, 2, 2 and none
            assert w == [([0, 0], [4, 2], "__0_0.distcp"), ([4, 0], [4, 2], "__1_0.distcp")], rank
        else:
            assert w == [], rank
    b_files = [sorted({p[3] for p in doc["predicted"] if p[0] == "b"}) for doc in docs]
    assert b_files == [["__0_0.distcp"], ["__0_0.distcp"], ["__1_0.distcp"], ["__1_0.distcp"]]
    from tests.loadcheck.test_load_plan import check_plan4

    check_plan4(out, docs)  # the load plan rank 0 drew from the gathered reports, against the real reads


def test_a_model_built_on_meta(tmp_path) -> None:
    """A model made on meta (as from a config) is predicted without allocating it; the real load
    goes into its ``to_empty`` twin."""
    import torch.distributed.checkpoint as dcp

    saved = _model_sd()
    folder = _save(saved, str(tmp_path / "ckpt"))
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6)).bfloat16()
    r = tv.load_check(model, folder, loader="dcp.load")
    assert all(p.device.type == "meta" for p in model.parameters())
    real = model.to_empty(device="cpu")
    reader = Recording(folder)
    dcp.load(real.state_dict(), storage_reader=reader)
    assert sorted(
        [c.name, list(c.dest_offsets), list(c.lengths), c.file, c.offset, c.length] for c in r.reads
    ) == sorted(reader.seen)
    assert {c[0] for c in r.narrowing} == set(saved) and not r.raises
    assert all(torch.equal(real.state_dict()[k], v.bfloat16()) for k, v in saved.items())
