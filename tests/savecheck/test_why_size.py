"""tv.why_size: why a torch checkpoint is this size. Every predicted size (the file, and the file
each fix gives) is checked against a real torch.save; every fix is run as pasted, in a
subprocess (tests/helpers/size_fix_runner.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

import tensorviz as tv
from tests.helpers import env, script
from tests.helpers.size_cases import CASES


def real_size(obj, path) -> int:
    torch.save(obj, path)
    return os.path.getsize(path)


def run_fixes(case: str, report, tmp_path) -> list[int]:
    codes = tmp_path / "fixes.json"
    codes.write_text(json.dumps([f.code for f in report.fixes]))
    out = tmp_path / "runs"
    out.mkdir()
    proc = subprocess.run(
        [*script("size_fix_runner"), case, str(codes), str(out)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # the last line: a library may print before it


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_predicted_sizes_are_real(tmp_path, case: str) -> None:
    obj = CASES[case]()
    report = tv.why_size(obj, name="checkpoint.pt")
    assert report.predicted and report.file_nbytes == real_size(obj, tmp_path / "checkpoint.pt")
    assert [f.file_nbytes for f in report.fixes] == run_fixes(case, report, tmp_path)
    # the same file read from disk: the same accounting, the same fixes and sizes
    on_disk = tv.why_size(str(tmp_path / "checkpoint.pt"))
    assert not on_disk.predicted and on_disk.file_nbytes == report.file_nbytes
    assert (on_disk.categories, on_disk.slices, on_disk.duplicates) == (
        report.categories,
        report.slices,
        report.duplicates,
    )
    assert [(f.code, f.file_nbytes) for f in on_disk.fixes] == [(f.code, f.file_nbytes) for f in report.fixes]


def test_training_checkpoint_explained() -> None:
    obj = CASES["training"]()
    r = tv.why_size(obj, name="checkpoint.pt")
    cats = {c.category: (c.written, c.read) for c in r.categories}
    weights = (50 * 8 + 8 + 8 + 50) * 4  # the tied embedding/head once
    assert cats["weights"] == (weights, weights)
    assert cats["optimizer"] == (2 * weights + 4 * 4, 2 * weights + 4 * 4)  # exp_avg, exp_avg_sq, 4 steps
    # the EMA dict cloned the tied weight twice: its copies are not tied
    assert cats["copies"] == (weights + 50 * 8 * 4, weights + 50 * 8 * 4)
    assert cats["other"] == (1000 * 10 * 4, 3 * 10 * 4)
    assert r.data_nbytes == sum(w for w, _ in cats.values())
    assert [(s.names, s.storage_nbytes, s.wasted_nbytes) for s in r.slices] == [(("extra.piece",), 40000, 39880)]
    assert [(d.kind, d.name, d.of) for d in r.duplicates] == [
        ("EMA copy", "ema.0.weight", "model.0.weight"),
        ("EMA copy", "ema.1.weight", "model.1.weight"),
        ("EMA copy", "ema.1.bias", "model.1.bias"),
        ("EMA copy", "ema.2.weight", "model.2.weight"),
        ("EMA copy", "ema.2.bias", "model.2.bias"),
    ]
    codes = [f.code.splitlines()[0] for f in r.fixes]
    assert codes == [
        "ckpt['extra']['piece'] = ckpt['extra']['piece'].clone()",
        "import torch.utils._pytree as pytree",
        "torch.save(ckpt['model'], \"model.pt\")",
        "torch.save(ckpt['ema'], \"ema.pt\")",
    ]
    clone_slices, clone_all = r.fixes[0].file_nbytes, r.fixes[1].file_nbytes
    assert r.file_nbytes - clone_slices == pytest.approx(39880, abs=200)  # the wasted bytes, less zip padding
    assert clone_all > clone_slices  # cloning every tensor unties the tied weight: 1,600 B more
    text = str(r)
    assert "partly read: extra.piece read 120 B of a 39.1 KiB storage: 38.9 KiB written that no name reads, in " in text
    assert "EMA copy: ema.0.weight has the shape of model.0.weight (1.6 KiB)" in text


def test_fp32_masters_beside_bf16_weights() -> None:
    r = tv.why_size(CASES["bf16_masters"](), name="checkpoint.pt")
    kinds = {(d.kind, d.name, d.nbytes) for d in r.duplicates}
    assert ("fp32 master", "master_params.0.weight", 50 * 8 * 4) in kinds
    assert {c.category for c in r.categories} == {"weights", "copies", "optimizer"}


def test_slices_and_views_that_cover_their_storage() -> None:
    r = tv.why_size(CASES["two_slices"](), name="checkpoint.pt")
    assert [(s.names, s.read_nbytes, s.wasted_nbytes) for s in r.slices] == [(("a", "b"), 1536, 65536 - 1536)]
    assert [(s.gaps, s.tail_nbytes) for s in r.slices] == [(3, 65536 - 102 * 512)]  # before a, between, after b
    assert r.fixes[0].code == "ckpt['a'] = ckpt['a'].clone()\nckpt['b'] = ckpt['b'].clone()"
    fused = tv.why_size(CASES["fused_qkv"](), name="checkpoint.pt")
    assert fused.slices == () and fused.fixes == ()


def test_cli_why_size(tmp_path, capsys) -> None:
    from tensorviz.cli import main

    path = tmp_path / "ckpt.pt"
    torch.save(CASES["two_slices"](), path)
    assert main([str(path), "--why-size", "--width", "400"]) == 0  # wide enough for the whole path
    out = capsys.readouterr().out
    assert (
        f"{path}: " in out
        and "partly read: a, b read 1.5 KiB of a 64.0 KiB storage: 62.5 KiB written that no name reads, in 3 runs"
        in out
    )
    assert "ckpt['a'] = ckpt['a'].clone()" in out
    assert f"fixes act on ckpt = torch.load({str(path)!r}, weights_only=True)" in out


def test_padding_after_a_flat_buffers_names_is_called_by_where_it_lies() -> None:
    """A flat buffer whose names stop short of its end (DeepSpeed pads each partition to an
    alignment) writes that tail no name reads: one run at its end, not a slice taken out of it."""
    flat = torch.zeros(10)
    r = tv.why_size({"w": flat[:4].view(2, 2), "b": flat[4:7]}, name="checkpoint.pt")
    assert [(s.names, s.read_nbytes, s.gaps, s.tail_nbytes) for s in r.slices] == [(("w", "b"), 28, 1, 12)]
    assert (
        "partly read: w, b read 28 B of a 40 B storage: 12 B written that no name reads, in one run at its end"
        in str(r)
    )
