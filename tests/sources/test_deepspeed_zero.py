"""DeepSpeed ZeRO per-rank optimizer partitions, written by DeepSpeed itself and checked against
DeepSpeed's own readers.

``tests/helpers/deepspeed_worker.py`` trains a tiny model with DeepSpeed on CPU (gloo, 1 and 2 ranks;
ZeRO-1 with bf16, ZeRO-2 in fp32, ZeRO-3 with bf16) and saves real checkpoints. tensorviz reads each
``*_optim_states.pt`` with its own restricted unpickler (DeepSpeed's records as inert stand-ins)
and names every piece of each flat partition ``rank<R>.optimizer.<param>.<key>``. The bytes at
tensorviz's offsets, read straight from the files, must be exactly what DeepSpeed reconstructs:
``get_fp32_state_dict_from_zero_checkpoint`` for the fp32 masters, the engine's gathered
``safe_get_full_optimizer_state`` for ``exp_avg``/``exp_avg_sq``.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensorviz as tv
from tests.helpers import env, script

pytest.importorskip("deepspeed")

SCENARIOS = ("zero1_bf16", "zero2_fp32", "zero3_bf16")
PARAMS = {"0.weight": (10, 6), "0.bias": (10,), "2.weight": (4, 10), "2.bias": (4,), "3.weight": (3, 4), "3.bias": (3,)}


@pytest.fixture(scope="module", params=[1, 2], ids=["1rank", "2ranks"])
def checkpoints(request, tmp_path_factory) -> tuple[int, str]:
    out = str(tmp_path_factory.mktemp(f"deepspeed{request.param}"))
    proc = subprocess.run(
        [*script("deepspeed_worker"), out, str(request.param)],
        capture_output=True,
        text=True,
        timeout=420,
        env=env(DS_ACCELERATOR="cpu"),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return request.param, out


def piece_values(layout: tv.Layout, name: str) -> np.ndarray:
    """The float32 values a view names, read from its file at tensorviz's byte range (no pickle)."""
    v = layout[name]
    st = layout.storage(v.storage)
    ident = st.key[1]
    path, _ = ident.rsplit(":", 1)
    at = layout.metadata["record_offsets"][ident] + v.start
    assert v.dtype == "float32" and v.stride == (1,)
    with open(path, "rb") as f:
        f.seek(at)
        return np.frombuffer(f.read(4 * v.shape[0]), dtype="<f4")


@pytest.mark.slow
@pytest.mark.spawn
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_zero_partitions_match_deepspeed(checkpoints, scenario: str) -> None:
    world, out = checkpoints
    folder = os.path.join(out, scenario, "global_step2")
    layout = tv.analyze(folder)
    prefix = "bf16_" if scenario.endswith("bf16") else ""
    want_files = {f"{prefix}zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(world)}
    if scenario.startswith("zero3"):  # ZeRO-3: model states per rank, its parameters empty placeholders
        want_files |= {f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in range(world)}
    else:
        want_files.add("mp_rank_00_model_states.pt")
    assert set(os.listdir(folder)) == want_files
    fp32 = torch.load(os.path.join(out, scenario, "zero_to_fp32.pt"), weights_only=True)
    live = torch.load(os.path.join(out, scenario, "reference.pt"), weights_only=True)
    assert set(fp32) == set(PARAMS)
    for param, shape in PARAMS.items():
        for key in ("fp32", "exp_avg", "exp_avg_sq"):
            pieces = [
                f"rank{r}.optimizer.{param}.{key}" for r in range(world) if f"rank{r}.optimizer.{param}.{key}" in layout
            ]
            assert pieces, (param, key)
            got = np.concatenate([piece_values(layout, n) for n in pieces])
            want = (fp32[param] if key == "fp32" else live[param][key]).detach().float()
            assert tuple(want.shape) == shape and got.size == want.numel(), (param, key, got.size)
            np.testing.assert_array_equal(got, want.flatten().numpy(), err_msg=f"{param}.{key}")
            if key == "fp32":
                np.testing.assert_array_equal(got, live[param]["fp32"].detach().flatten().numpy())
            assert {layout[n].category for n in pieces} == {"copies" if key == "fp32" else "optimizer"}
    tree = layout.tree()  # every rank's state under its parameter's module, by category
    for param, shape in PARAMS.items():
        n = math.prod(shape)
        weights = 0 if scenario.startswith("zero3") else n * (2 if scenario.endswith("bf16") else 4)
        assert dict(tree.find(f"module.{param}").categories) == {"weights": weights, "optimizer": 2 * n * 4}


@pytest.mark.slow
@pytest.mark.spawn
def test_zero_partition_offsets_are_deepspeeds(checkpoints) -> None:
    """Each rank's file alone: its views lie at the starts DeepSpeed recorded in
    ``param_slice_mappings`` (read here with DeepSpeed's own classes, weights_only=False, in
    the test only), over the flat fp32 partition and the optimizer state tensors."""
    world, out = checkpoints
    folder = os.path.join(out, "zero2_fp32", "global_step2")
    for r in range(world):
        path = os.path.join(folder, f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt")
        layout = tv.analyze(path)
        osd = torch.load(path, weights_only=False)["optimizer_state_dict"]
        (mapping,) = osd["param_slice_mappings"]
        (flat,) = osd["single_partition_of_fp32_groups"]
        names = {v.name for v in layout.views}
        want_names = {f"optimizer.{p}.{k}" for p in mapping for k in ("fp32", "exp_avg", "exp_avg_sq")}
        assert names == want_names
        for p, frag in mapping.items():
            v = layout[f"optimizer.{p}.fp32"]
            assert (v.offset - flat.storage_offset(), v.shape) == (frag.start, (frag.numel,))
            np.testing.assert_array_equal(
                piece_values(layout, v.name), flat[frag.start : frag.start + frag.numel].detach().numpy()
            )
        assert layout.metadata["training"]["optimizers"]["optimizer"]["mapped_by"] == "param_slice_mappings"
        # why_size: each flat tensor written whole, its padding read by no name
        read = 4 * sum(frag.numel for frag in mapping.values())
        written = flat.untyped_storage().nbytes()
        exp_avg = osd["base_optimizer_state"]["state"][0]["exp_avg"]
        assert exp_avg.untyped_storage().nbytes() == written
        report = tv.why_size(path)
        cats = {c.category: (c.written, c.read) for c in report.categories}
        assert cats == {"optimizer": (2 * written, 2 * read), "copies": (written, read)}
        assert report.file_nbytes == os.path.getsize(path) and report.fixes == ()
        assert "ZeRO stage 2" in layout.metadata["training"]["notes"][0]


@pytest.mark.slow
@pytest.mark.spawn
def test_reading_imports_no_deepspeed_and_keeps_torchs_safe_globals(checkpoints) -> None:
    """In a fresh interpreter: reading every scenario's folder imports no DeepSpeed module and
    leaves torch's process-wide safe-globals list as it was."""
    _, out = checkpoints
    folders = [os.path.join(out, s, "global_step2") for s in SCENARIOS]
    code = (
        "import sys, torch, tensorviz as tv\n"
        "before = list(torch.serialization.get_safe_globals())\n"
        f"n = [len(tv.analyze(f).views) for f in {folders!r}]\n"
        "assert not [m for m in sys.modules if m.startswith('deepspeed')], 'deepspeed imported'\n"
        "assert list(torch.serialization.get_safe_globals()) == before, 'safe globals changed'\n"
        "print(*n)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [int(x) for x in proc.stdout.split()] == [len(tv.analyze(f).views) for f in folders]
