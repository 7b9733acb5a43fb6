"""The CLI's text fits the terminal (issue 25, item 5): at 80 columns (the default when stdout is
no terminal) and at 120, no line is wider; a shortened line loses details first, then the middle
of its longest name, never silently (a closing line says so); every name is whole with
``--full`` and in ``--json``; the hints name the CLI's flags, not Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tensorviz.cli import FULL_HINT, main
from tensorviz.core.units import format_bytes

ROOT = Path(__file__).resolve().parents[2]
LONG = "model.language_model.embed_tokens_with_a_really_long_unbroken_name_for_testing_purposes.weight"


def names_for(layers: int) -> list[str]:
    parts = ["self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"]
    return [f"model.language_model.layers.{i}.{p}.weight" for i in range(layers) for p in parts] + [LONG]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[Path, list[str]]]:
    root = tmp_path_factory.mktemp("width")
    out = {}
    for key, layers in (("small", 3), ("large", 50)):  # 10 names (listed) and 151 (summarised)
        names = names_for(layers)
        path = root / f"{key}.safetensors"
        save_file({n: torch.zeros(8, 8) for n in names}, path)
        out[key] = (path, names)
    return out


def run(capsys, monkeypatch, columns: int, *argv: str) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main([str(a) for a in argv]) == 0
    captured = capsys.readouterr()
    return (captured.out + captured.err).splitlines()


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("key", ["small", "large"])
def test_no_line_is_wider_than_the_terminal(files, capsys, monkeypatch, columns, key):
    path, names = files[key]
    for extra in ([], ["--save-check"], ["--tree"], ["--why-size"] if key == "small" else ["--max-views", "3"]):
        lines = run(capsys, monkeypatch, columns, path, *extra)
        assert max(map(len, lines)) <= columns, (extra, max(lines, key=len))
        assert all("layout.to_text" not in line and "layout.tree()" not in line for line in lines)
    full = "\n".join(run(capsys, monkeypatch, columns, path, "--full"))
    assert all(f"  - {n}  float32[8×8] stride=(8, 1) offset=" in full for n in names)  # every name whole
    doc = json.loads("\n".join(run(capsys, monkeypatch, columns, path, "--json")))
    assert sorted(v["name"] for v in doc["views"]) == sorted(names)


def test_a_shortened_listing_says_so_and_keeps_names_readable(files, capsys, monkeypatch):
    path, names = files["small"]
    lines = run(capsys, monkeypatch, 80, path)
    assert lines[-1] == "(11 lines shortened to 80 columns; whole with --full, every name in --json)"
    # details go first (the exact byte count, stride, offset, a file's ".safetensors"), then the
    # middle of the longest name
    with open(path, "rb") as f:
        head = 8 + int.from_bytes(f.read(8), "little")  # the header: 8 + N bytes
    size, fb = path.stat().st_size, format_bytes
    assert lines[3] == f"storage #0 small {fb(size)}: 10 views, {fb(size - head)} read, {fb(head)} header"
    assert any(line.startswith("  - model.….layers.0.self_attn.q_proj.weight  float32[8×8]  bytes [") for line in lines)
    long = "  - model.language_model…sting_purposes.weight  float32[8×8]  bytes ["  # not 'model.….weight'
    assert any(line.startswith(long) for line in lines)
    wide = run(capsys, monkeypatch, 200, path)
    assert not any("shortened" in line for line in wide) and max(map(len, wide)) <= 200
    assert f"  - {LONG}  float32[8×8] stride=(8, 1) offset=0  bytes [" in "\n".join(wide)


def test_a_summary_ends_with_the_cli_flags(files, capsys, monkeypatch):
    path, _ = files["large"]
    lines = run(capsys, monkeypatch, 120, path)
    assert FULL_HINT == "full listing: --full · module tree: --tree · every name: --json"
    assert FULL_HINT in lines


def test_eighty_columns_when_stdout_is_no_terminal(files):
    path, _ = files["small"]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "tensorviz", str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and max(map(len, lines)) <= 80
    assert lines[-1].startswith("(11 lines shortened to 80 columns")


def test_a_shard_keeps_its_number(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "shards"
    folder.mkdir()
    for i in (1, 2):
        names = [f"model.language_model.layers.{i}.self_attn.q_proj.weight"]
        save_file({n: torch.zeros(2) for n in names}, folder / f"model-0000{i}-of-00002.safetensors")
    lines = run(capsys, monkeypatch, 80, folder)
    assert [line.split(" ")[2] for line in lines if line.startswith("storage #")] == [
        "model-00001-of-00002",
        "model-00002-of-00002",
    ]
    assert max(map(len, lines)) <= 80
