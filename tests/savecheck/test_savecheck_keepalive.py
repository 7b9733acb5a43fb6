"""The save check's torch.save verdict says what each slice keeps alive (issue 30, item 3), and
what it says is checked against torch: the storage a slice holds, the bytes torch.save writes for
it, and what ``.clone()`` holds instead."""

from __future__ import annotations

import os

import torch

import tensorviz as tv


def _torch_save_verdict(obj):
    return next(v for v in tv.save_check(obj).verdicts if v.saver == "torch.save")


def test_a_slice_keeps_its_whole_storage_alive_and_clone_holds_only_its_bytes(tmp_path):
    big = torch.zeros(1000, 100)
    piece = big[3, :16]
    v = _torch_save_verdict({"piece": piece})
    assert v.outcome == "writes unreferenced bytes"
    assert (
        "piece reads 64 B but keeps its whole 390.6 KiB storage alive; piece.clone() would hold 64 B "
        "(399,936 bytes fewer)"
    ) in v.notes
    # Reality: the slice holds the whole storage, torch.save writes it, the clone holds 64 B.
    assert piece.untyped_storage().nbytes() == 400_000
    assert piece.clone().untyped_storage().nbytes() == 64
    torch.save({"piece": piece}, tmp_path / "slice.pt")
    torch.save({"piece": piece.clone()}, tmp_path / "clone.pt")
    assert os.path.getsize(tmp_path / "slice.pt") - os.path.getsize(tmp_path / "clone.pt") == 400_000 - 64


def test_no_note_when_every_storage_is_read_in_full_and_a_limit_on_many():
    w = torch.zeros(8, 8)
    assert not any("keeps its whole" in n for n in _torch_save_verdict({"w": w, "wt": w.t()}).notes)
    big = torch.zeros(50, 10)
    v = _torch_save_verdict({f"row{i}": big[i] for i in range(5)})
    kept = [n for n in v.notes if "keeps its whole" in n or "more tensors keep" in n]
    assert kept[:3] == [
        f"row{i} reads 40 B but keeps its whole 2.0 KiB storage alive; row{i}.clone() would hold 40 B "
        "(1,960 bytes fewer)"
        for i in range(3)
    ]
    assert kept[3] == "… and 2 more tensors keep storages bigger than what they read alive"
