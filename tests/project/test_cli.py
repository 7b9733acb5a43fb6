"""The ``tensorviz`` command: text, JSON, pictures, exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import tensorviz as tv
from tensorviz.cli import JSON_SCHEMA_VERSION, layout_to_json, main

safetensors_torch = pytest.importorskip("safetensors.torch")


@pytest.fixture
def tied_file(tmp_path):
    from tests.helpers.models import TiedLM

    path = tmp_path / "tied.safetensors"
    safetensors_torch.save_model(TiedLM(vocab=6, dim=2), str(path))
    return path


def dropped_record(path) -> tuple[str, str]:
    """(dropped, kept) as save_model wrote it into __metadata__ (read by hand: the oracle)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        ((dropped, kept),) = json.loads(f.read(n))["__metadata__"].items()
    return dropped, kept


@pytest.fixture
def sliced_ckpt(tmp_path):
    a = torch.rand(8, 10, 50)
    emb = torch.rand(6, 2)
    path = tmp_path / "ckpt.pt"
    torch.save({"a": a, "b": a[2:4], "c": a[4:6], "emb": emb, "head": emb, "t": emb.t()}, path)
    return path


def test_text_summary_with_metadata(tied_file, capsys):
    assert main([str(tied_file), "--width", "400"]) == 0  # wide enough for the whole lines
    out = capsys.readouterr().out
    assert out == tv.analyze(tied_file).to_text() + "\n"
    dropped, kept = dropped_record(tied_file)
    assert {dropped, kept} == {"lm_head.weight", "wte.weight"}
    assert f"dropped: {dropped} -> kept {kept}" in out


def test_by_span_lists_the_exact_span_groups(sliced_ckpt, capsys):
    assert main([str(sliced_ckpt), "--by", "span", "--max-views", "2"]) == 0
    out = capsys.readouterr().out
    assert "shared groups (by span): 1\n  {emb, head, t} bytes [0, 48)" in out
    assert "  … 1 more" in out  # three views on a's storage, two listed


def test_json_schema(sliced_ckpt, capsys):
    assert main([str(sliced_ckpt), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # stdout is pure JSON
    assert (doc["schema"], doc["version"], doc["source"]) == ("tensorviz.layout", JSON_SCHEMA_VERSION, str(sliced_ckpt))
    assert set(doc) == {
        "schema",
        "version",
        "tensorviz_version",
        "source",
        "storages",
        "views",
        "groups",
        "skipped",
        "metadata",
        "categories",  # training state by category ({} here: a plain state dict)
    }
    assert doc["categories"] == {}
    layout = tv.analyze(sliced_ckpt)
    b = next(v for v in doc["views"] if v["name"] == "b")
    assert b == {
        "name": "b",
        "storage": list(layout["b"].storage),
        "storage_index": 0,
        "device": "file",
        "dtype": "float32",
        "shape": [2, 10, 50],
        "stride": [500, 50, 1],
        "offset": 1000,
        "itemsize": 4,
        "start": 4000,
        "stop": 8000,
        "nbytes": 4000,
        "footprint_nbytes": 4000,
        "is_contiguous": True,
        "exact": True,
        "note": "",
        "category": "",
        "logical": None,
        "piece": None,
    }
    assert [v["name"] for v in doc["views"]] == list(layout.names)
    s0 = doc["storages"][0]
    assert (s0["index"], s0["device"], s0["nbytes"], s0["names"], s0["complete_names"]) == (
        0,
        "file",
        16000,
        ["a", "b", "c"],
        ["a"],
    )
    assert s0["label"] == f"ckpt.pt:{s0['key'][1].rsplit(':', 1)[1]}"
    groups = {by: [g["names"] for g in doc["groups"][by]] for by in ("storage", "span", "overlap")}
    assert groups == {
        "storage": [["a", "b", "c"], ["emb", "head", "t"]],
        "span": [["a"], ["b"], ["c"], ["emb", "head", "t"]],
        "overlap": [["a", "b", "c"], ["emb", "head", "t"]],
    }
    assert doc["groups"]["span"][3] == {
        "names": ["emb", "head", "t"],
        "storage": s0["key"][:1] + [doc["storages"][1]["key"][1]],
        "storage_index": 1,
        "start": 0,
        "stop": 48,
    }
    assert doc["metadata"]["format"] == "torch" and doc["skipped"] == []


def test_json_to_a_file_and_text_to_stdout(tied_file, tmp_path, capsys):
    out = tmp_path / "layout.json"
    assert main([str(tied_file), "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("3 tensors on 1 file")
    assert captured.err == f"wrote {out} ({out.stat().st_size} bytes)\n"
    doc = json.loads(out.read_text())
    assert doc == json.loads(json.dumps(layout_to_json(tv.analyze(tied_file))))
    data_start = doc["views"][0]["start"]
    assert doc["metadata"]["header"] == {str(tied_file): [0, data_start]}
    dropped, kept = dropped_record(tied_file)
    assert doc["metadata"]["dropped"] == {dropped: kept}


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.safetensors"], "tensorviz: error: no such file or folder: 'missing.safetensors'\n"),
        (
            ["bad.safetensors"],
            "tensorviz: error: bad.safetensors: the file is empty (0 bytes); a safetensors "
            "file starts with an 8-byte header length\n",
        ),
        (["module.pt"], None),
    ],
)
def test_bad_input_exits_1_with_one_line(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.safetensors").write_bytes(b"")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    assert main(args) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    if message:
        assert captured.err == message
    else:
        assert captured.err.startswith("tensorviz: error: module.pt: the pickle needs torch.nn.modules.linear.Linear")


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["x.safetensors", "--by", "bogus"])
    assert info.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def test_png_is_the_diagram_of_the_layout(tied_file, tmp_path, capsys):
    from tensorviz.plan.diagram import diagram
    from tensorviz.render.mpl import to_png

    out = tmp_path / "d.png"
    assert main([str(tied_file), "--png", str(out), "--by", "span"]) == 0
    assert out.read_bytes() == to_png(diagram(tv.analyze(tied_file), by="span"))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_is_the_explorer_page(tied_file, tmp_path, capsys):
    """--html writes tv.export_html's page (tests/explorer/test_export.py checks what it carries)."""
    from tensorviz.explorer.export import page_html
    from tensorviz.explorer.state import ExplorerState

    out = tmp_path / "d.html"
    assert main([str(tied_file), "--html", str(out)]) == 0
    data = '<script type="application/json" id="tvz-data">'
    page, want = out.read_text(), page_html(tv.analyze(tied_file), ExplorerState())
    assert page.split(data)[1].split("</script>")[0] == want.split(data)[1].split("</script>")[0]


def test_save_check_report_follows_the_summary(sliced_ckpt, capsys):
    saving = pytest.importorskip("tensorviz.savecheck.report")
    try:
        expected = saving.save_check(tv.analyze(sliced_ckpt)).to_text()
    except ImportError as err:  # the save-check helper's modules are still being written
        pytest.skip(f"tensorviz.savecheck is incomplete: {err}")
    assert main([str(sliced_ckpt), "--save-check", "--width", "400"]) == 0
    out = capsys.readouterr().out
    assert out == tv.analyze(sliced_ckpt).to_text() + "\n" + expected + "\n"


def test_python_dash_m_and_console_script(tied_file):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    run = subprocess.run(
        [sys.executable, "-m", "tensorviz", str(tied_file), "--json"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0
    assert json.loads(run.stdout) == json.loads(json.dumps(layout_to_json(tv.analyze(tied_file))))
    script = os.path.join(os.path.dirname(sys.executable), "tensorviz")
    if not os.path.exists(script):
        pytest.skip("the console script is not installed in this environment")
    run = subprocess.run([script, str(tied_file) + ".nope"], capture_output=True, text=True, env=env)
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr == f"tensorviz: error: no such file or folder: '{tied_file}.nope'\n"


def test_negative_max_views_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["x.safetensors", "--max-views", "-1"])
    assert info.value.code == 2
    assert "argument --max-views: must be a count (0 or more), got -1" in capsys.readouterr().err


def test_a_reader_that_stops_early_is_no_error(tmp_path):
    """``tensorviz big.safetensors | head -1``: the closed pipe ends the command quietly."""
    path = tmp_path / "many.safetensors"
    safetensors_torch.save_file({f"layer.{i}.weight": torch.zeros(1) for i in range(3000)}, path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorviz", str(path), "--full", "--max-views", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(b"3000 tensors on 1 file")
    proc.stdout.close()  # the text is far larger than a pipe's buffer: the next writes fail
    err = proc.stderr.read()
    proc.stderr.close()
    assert (proc.wait(timeout=60), err) == (1, b"")


def test_a_library_printing_to_stdout_during_the_work_goes_to_stderr(capsys):
    """Only the CLI's own output reaches stdout: DeepSpeed, imported by transformers while a
    save or load check runs, logs "Setting accelerator to CPU" through a StreamHandler it makes
    on sys.stdout at import; with --json on stdout that line would break the document."""
    import logging

    from tensorviz import cli

    def run() -> int:
        print("[WARNING] printed by a library")
        handler = logging.StreamHandler(sys.stdout)  # as a library's logger binds it at import
        log = logging.getLogger("tensorviz-test-library")
        log.addHandler(handler)
        try:
            log.warning("[WARNING] logged by a library")
        finally:
            log.removeHandler(handler)
        print(json.dumps({"ok": 1}), file=cli._stdout())
        return 0

    assert cli._guarded(run, "tensorviz", 1) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"ok": 1}
    assert "printed by a library" in err and "logged by a library" in err
    assert cli._stdout() is sys.stdout  # nothing left redirected
