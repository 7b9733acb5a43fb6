"""The explorer's compare mode (``tv.explore(a, compare=b)``, issue 23 item 3): the payload's
``"compare"`` section row by row, with exact marks, bytes and facts, for table-driven diffs (a
rename by prefix, a dtype change, a tie lost through a real safetensors save and reload, a file
read header-only), checked against the static side by side's alignment and ``data_ptr`` sharing;
the selection of a pair; the row budget; escaping."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("anywidget")

import tensorviz as tv  # noqa: E402
from tensorviz.explorer.compare import COLUMNS, MARKS, CompareRows, rename_rule  # noqa: E402
from tensorviz.explorer.wire import browser_form, unframe  # noqa: E402
from tensorviz.render.diff import diff_items  # noqa: E402


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)  # 160 B
        self.mid = nn.Linear(4, 3)  # 48 B + 12 B
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight


def _save_load(folder: str) -> tuple[nn.Module, dict]:
    """A tied model, its state dict saved with safetensors' save_file (clones: the tie cannot be
    saved) and loaded back with load_file."""
    from safetensors.torch import load_file, save_file

    m = Tied()
    path = os.path.join(folder, "sd.safetensors")
    save_file({k: v.detach().clone().contiguous() for k, v in m.state_dict().items()}, path)
    return m, load_file(path)


def _save_model_file(folder: str) -> tuple[nn.Module, str]:
    """A tied model and the file safetensors' save_model writes (one name of the tie kept)."""
    from safetensors.torch import save_model

    m = Tied()
    path = os.path.join(folder, "model.safetensors")
    save_model(m, path)
    return m, path


_TIED_NAMES = ("emb.weight", "mid.weight", "mid.bias", "head.weight")

#: name -> (build(folder) -> (a, b), rows: (key, b-name, marks in words, bytes in a, bytes in b)).
CASES: dict[str, tuple[Callable[[str], tuple[Any, Any]], list[tuple]]] = {
    "rename by prefix": (
        lambda f: (
            {"emb": torch.zeros(10, 4), "layers.0.w": torch.zeros(4, 4)},
            {"module.emb": torch.zeros(10, 4), "module.layers.0.w": torch.zeros(4, 4)},
        ),
        [
            ("emb", "module.emb", ("renamed",), 160, 160),
            ("layers.0.w", "module.layers.0.w", ("renamed",), 64, 64),
        ],
    ),
    "dtype change": (
        lambda f: (
            {"a": torch.zeros(4, 4), "b": torch.zeros(8), "c": torch.zeros(2)},
            {"a": torch.zeros(4, 4, dtype=torch.bfloat16), "b": torch.zeros(8), "d": torch.zeros(3)},
        ),
        [
            ("a", "a", ("dtype",), 64, 32),
            ("b", "b", (), 32, 32),
            ("c", None, ("only in a",), 8, None),
            ("d", "d", ("only in b",), None, 12),
        ],
    ),
    "tie lost: save_file + load_file": (
        _save_load,
        [
            ("emb.weight", "emb.weight", ("tie lost",), 160, 160),
            ("mid.weight", "mid.weight", (), 48, 48),
            ("mid.bias", "mid.bias", (), 12, 12),
            ("head.weight", "head.weight", ("tie lost",), 160, 160),
        ],
    ),
    "save_model file, header-only": (
        _save_model_file,
        [
            ("emb.weight", "emb.weight", ("tie lost",), 160, 160),
            ("mid.weight", "mid.weight", (), 48, 48),
            ("mid.bias", "mid.bias", (), 12, 12),
            ("head.weight", None, ("only in a", "tie lost"), 160, None),
        ],
    ),
}


def _rows(section) -> list[tuple]:
    return [(r.key, r.name_b, r.words, r.a.nbytes if r.a else None, r.b.nbytes if r.b else None) for r in section.rows]


def _decoded(sent: dict) -> dict[str, Any]:
    """The section's columns as the browser decodes them (compare.js decodeCompare)."""
    cols = unframe(sent["frame"], tuple(sent["columns"]))
    n = len(cols["side"])
    text = {k: cols[k].decode().split("\n") if n else [] for k in COLUMNS if k.startswith(("names", "rule"))}
    return {
        "side": list(cols["side"]),
        "marks": np.frombuffer(cols["marks"], "<u2").tolist(),
        "bytes_a": np.frombuffer(cols["bytes_a"], "<f8").tolist(),
        "bytes_b": np.frombuffer(cols["bytes_b"], "<f8").tolist(),
        **text,
    }


@pytest.mark.parametrize("case", list(CASES))
def test_rows_marks_and_bytes(case, tmp_path):
    build, expected = CASES[case]
    a, b = build(str(tmp_path))
    ex = tv.explore(a, compare=b, snapshot=False)
    section = ex.compare_rows.section()
    assert _rows(section) == expected
    # the static side by side's alignment, name for name
    assert [r.key for r in section.rows] == [n for n, _ in diff_items(ex.compare_rows.diff)]
    sent = ex.canvas.payload["compare"]
    got = _decoded(sent)
    bits = {w: 1 << k for k, (_, _, w, _) in enumerate(MARKS)}
    assert got["marks"] == [sum(bits[w] for w in words) for _, _, words, _, _ in expected]
    assert got["bytes_a"] == [-1 if x is None else x for *_, x, _ in expected]
    assert got["bytes_b"] == [-1 if x is None else x for *_, x in expected]
    assert got["side"] == [(x is not None) | (y is not None) << 1 for *_, x, y in expected]
    assert sent["left_out"] == 0 and sent["total"] == len(expected)
    assert sent["counts"] == [sum(w in words for _, _, words, _, _ in expected) for _, _, w, _ in MARKS]


def test_ties_lost_are_the_data_ptr_sharing_that_went(tmp_path):
    """The rows marked 'tie lost' after a real save and reload are exactly the names that shared
    a data_ptr (and span) before and no longer do after (brute force over the tensors)."""
    m, loaded = _save_load(str(tmp_path))
    before = {k: (v.data_ptr(), v.nbytes) for k, v in m.state_dict(keep_vars=True).items()}
    after = {k: (v.data_ptr(), v.nbytes) for k, v in loaded.items()}
    lost = {k for k in before for j in before if j != k and before[j] == before[k] and after[j] != after[k]}
    rows = CompareRows(tv.diff(m, loaded)).section().rows
    assert {r.key for r in rows if "tie lost" in r.words} == lost == {"emb.weight", "head.weight"}
    head = next(r for r in rows if r.key == "head.weight")
    assert head.a is not None and head.b is not None
    assert (head.a.tie, head.b.tie) == ("tied with emb.weight", "")


def test_summary_and_facts_of_a_dtype_change():
    w = torch.zeros(4, 6)
    rows = CompareRows(tv.diff({"w": w, "r": w[1]}, {"module.w": w.half(), "module.r": w[1].clone()}))
    s = rows.section()
    assert s.summary == "2 tensors in a, 2 in b, 2 matched (2 by rule) · dtype 1, offset 1, sharing lost 2 · differ"
    w_row = s.rows[0]
    assert w_row.words == ("dtype", "sharing lost", "renamed")
    assert w_row.rule == "prefix 'module.' removed from b"
    assert w_row.a is not None and w_row.b is not None
    assert (w_row.a.shape, w_row.a.stride, w_row.a.offset, w_row.a.dtype, w_row.a.nbytes) == (
        (4, 6),
        (6, 1),
        0,
        "float32",
        96,
    )
    assert (w_row.b.dtype, w_row.b.nbytes, w_row.a.tie, w_row.b.tie) == ("float16", 48, "shares bytes with r", "")
    assert w_row.a.storage == "#0 cpu · 96 B"
    r_row = s.rows[1]
    assert r_row.words == ("offset", "sharing lost", "renamed")
    assert r_row.a is not None and r_row.b is not None and (r_row.a.offset, r_row.b.offset) == (6, 0)


def test_rename_rule_words():
    assert rename_rule("module.w", "w") == "prefix 'module.' removed from a"
    assert rename_rule("base_model.model.x.y", "model.x.y") == "prefix 'base_model.' removed from a"
    assert rename_rule("w", "_orig_mod.w") == "prefix '_orig_mod.' removed from b"
    assert rename_rule("module.w", "model.w") == "prefix 'module.' removed from a and 'model.' removed from b"


def test_row_budget_sends_marked_rows_first_in_aligned_order():
    a = {f"layers.{i}.w": torch.zeros(4) for i in range(10)}
    b = {**a, "layers.3.w": torch.zeros(4).double(), "layers.8.w": torch.zeros(2)}
    rows = CompareRows(tv.diff(a, b), budget=4)
    s = rows.section()
    assert [r.key for r in s.rows] == ["layers.0.w", "layers.1.w", "layers.3.w", "layers.8.w"]
    assert (s.left_out, s.total) == (6, 10)
    assert s.wire()["left_out"] == 6
    # the name filter reaches the rest
    assert [r.key for r in rows.section(r"layers\.[67]\.").rows] == ["layers.6.w", "layers.7.w"]


def test_the_filter_and_the_selection_of_a_pair():
    w = torch.zeros(4, 4)
    ex = tv.explore(
        {"w": w, "v": w, "x": torch.zeros(3)},
        compare={"module.w": w.half(), "module.v": w.clone(), "module.y": torch.zeros(2)},
        snapshot=False,
    )
    assert ex.canvas.payload["compare"]["total"] == 4
    ex.selected = ["module.y"]  # a name only in b selects its row
    assert ex.selected == ["module.y"]
    assert "<b>module.y</b>: only in b" in ex.details.value
    ex.selected = ["w"]  # the pair: a's name, both sides in the details
    assert "<td>w</td><td></td><td>module.w</td>" in ex.details.value
    assert "<th>dtype</th><td>float32</td><td>≠</td><td>float16</td>" in ex.details.value
    ex.name_filter.value = "x"
    assert ex.canvas.payload["compare"]["total"] == 1 and ex.selected == []
    ex.canvas.set_state({"selected": ["nope"]})  # a stale click is dropped
    assert ex.selected == []


def test_hostile_names_are_escaped_everywhere():
    bad = "evil<script>\u202e\n.w"
    ex = tv.explore({bad: torch.zeros(2)}, compare={bad: torch.zeros(2).half()}, snapshot=False)
    sent = ex.canvas.payload["compare"]
    names = unframe(sent["frame"], tuple(sent["columns"]))["names_a"].decode()
    assert names == browser_form(bad) and "\n" not in names and "\u202e" not in names
    ex.canvas.set_state({"selected": [browser_form(bad)]})  # the browser sends the name as it shows it
    assert ex.selected == [bad]
    assert "<script>" not in ex.details.value and "&lt;script&gt;" in ex.details.value


def test_compare_takes_anything_diff_takes(tmp_path):
    """Two files header-only (no tensor loaded), and a Layout."""
    from safetensors.torch import save_file

    pa, pb = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    save_file({"w": torch.zeros(4, 4)}, pa)
    save_file({"w": torch.zeros(4, 4, dtype=torch.float16), "z": torch.zeros(1)}, pb)
    ex = tv.explore(pa, compare=tv.analyze(pb), snapshot=False)
    assert _rows(ex.compare_rows.section()) == [("w", "w", ("dtype",), 64, 32), ("z", "z", ("only in b",), None, 4)]


def test_the_static_picture_is_the_side_by_side():
    """Where the live explorer does not draw (a saved notebook), compare mode shows the static side
    by side of the two layouts: its PNG, escaped HTML (no script) and the diff's text."""
    w = torch.zeros(4, 4)
    b = {"w<script>": w.half(), "v": w}
    ex = tv.explore({"w<script>": w, "v": w}, compare=b, snapshot=False)
    snap = ex.static()
    d = ex.compare_rows.diff
    assert snap.png[:4] == b"\x89PNG"
    assert snap.caption.endswith("; compared with b: 2 tensors in a, 2 in b, 2 matched · tie lost 2, dtype 1 · differ")
    assert snap.text.endswith(str(d))
    body = snap.to_html()
    assert "<script" not in body and "w&lt;script&gt;" in body
    assert ex._repr_mimebundle_()["text/plain"] == snap.text


def test_a_diff_with_content_marks_bytes_that_differ():
    """compare= also takes tv.diff(a, b)'s result: with content=True, rows whose bytes differ
    (checked against torch.equal) carry the mark."""
    a = {"same": torch.ones(4), "changed": torch.ones(4)}
    b = {"same": torch.ones(4), "changed": torch.full((4,), 2.0)}
    ex = tv.explore(a, compare=tv.diff(a, b, content=True), snapshot=False)
    marked = {r.key for r in ex.compare_rows.section().rows if "bytes differ" in r.words}
    assert marked == {k for k in a if not torch.equal(a[k], b[k])} == {"changed"}
