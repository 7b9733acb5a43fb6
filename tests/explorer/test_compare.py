"""The explorer's compare mode (``tv.explore(a, compare=b)``, issue 23 item 3): the payload's
``"compare"`` section row by row, with exact marks, bytes and facts, for table-driven diffs (a
rename by prefix, a dtype change, a tie lost through a real safetensors save and reload, a file
read header-only), checked against the static side by side's alignment and ``data_ptr`` sharing;
the selection of a pair; the row budget; escaping."""

from __future__ import annotations

import html
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


def test_the_tensor_list_says_what_changed():
    """In compare mode each listed name carries its row's marks in words (the rename left out:
    it is on every name of a wrapped model); stopping the comparison takes them away."""
    emb = torch.zeros(64, 16)
    a = {"embed.weight": emb, "lm_head.weight": emb, "x\x1b[31m": torch.zeros(3), "y": torch.zeros(2)}
    b = {"module.embed.weight": emb.half(), "module.lm_head.weight": emb.clone(), "module.y": torch.zeros(2)}
    ex = tv.explore(a, compare=b, expand_simple=True, snapshot=False)
    assert ex.tensor_list.options == (
        ("embed.weight  — ≢ tie lost · Δ dtype", "embed.weight"),
        ("lm_head.weight  — ≢ tie lost", "lm_head.weight"),
        ("x\\x1b[31m  — − only in a", "x\x1b[31m"),
        ("y", "y"),
    )
    glyph = {w: g for _, g, w, _ in MARKS}
    rows = {r.key: r.words for r in ex.compare_rows.section().rows}
    for label, name in ex.tensor_list.options:  # the same words as the rows, from the marks
        words = [w for w in rows[name] if w != "renamed"]
        assert label.endswith(" · ".join(f"{glyph[w]} {w}" for w in words)) and (" — " in label) == bool(words)
    ex.canvas.selected = ["lm_head.weight"]
    assert ex.tensor_list.value == ("lm_head.weight",)
    ex.compare_with(None)
    assert [label for label, _ in ex.tensor_list.options] == ["embed.weight", "lm_head.weight", "x\\x1b[31m", "y"]
    assert ex.tensor_list.value == ("lm_head.weight",)


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


def _strips(panel) -> list[tuple[int, int, list[tuple[str, str]]]]:
    return [(s["storage"], s["nbytes"], [(v["name"], v["dtype"]) for v in s["views"]]) for s in panel.plan["strips"]]


def test_explain_draws_both_sides_of_the_selection():
    """In the compare mode the explain pane draws a's views of the selection, then b's (the
    matched names, the names only in b), each under a heading naming its side and source: the
    tie a had (one strip, both names) beside b's two storages."""
    w = torch.zeros(4, 4)
    ex = tv.explore(
        {"w": w, "v": w, "x": torch.zeros(3)},
        compare={"module.w": w.half(), "module.v": w.clone(), "module.y<b>": torch.zeros(2)},
        snapshot=False,
    )
    ex.explain_button.click()
    assert "Select one or more tensors" in ex.explain_message.value and ex.explain_b.children == ()
    ex.selected = ["w", "v"]  # the open pane follows the selection
    (live_a,) = ex.explain_live.children
    heading_b, live_b = ex.explain_b.children
    assert ex.explain_message.value.startswith('<div class="tvz-side"><b>a</b> · dict</div>')
    assert heading_b.value.startswith('<div class="tvz-side"><b>b</b> · dict</div>')
    assert "module.w, module.v maps" in heading_b.value
    assert _strips(live_a) == [(0, 64, [("w", "float32"), ("v", "float32")])]
    assert _strips(live_b) == [(0, 32, [("module.w", "float16")]), (1, 64, [("module.v", "float32")])]
    ex.selected = ["module.y<b>", "x"]  # a name only in b and one only in a
    assert _strips(ex.explain_live.children[0]) == [(1, 12, [("x", "float32")])]
    heading_b, live_b = ex.explain_b.children
    assert "module.y&lt;b&gt; maps" in heading_b.value and "<b>" not in heading_b.value.split("</div>")[1]
    assert _strips(live_b) == [(2, 8, [("module.y<b>", "float32")])]
    ex.selected = ["module.y<b>"]
    assert ex.explain_message.value.endswith("No view of the selection is in a.</span>")
    assert ex.explain_live.children == () and ex.explain_picture.layout.display == "none"
    ex.compare_with(None)  # comparing no more: one side, no heading
    ex.expand_box.value = True  # (x alone in its storage is folded otherwise)
    ex.selected = ["x"]
    assert ex.explain_b.children == () and ex.explain_message.value.startswith('<span class="tvz-muted">How each')
    assert ex.last_error is None


def test_the_summary_counts_values_not_compared():
    w = torch.zeros(4)
    ex = tv.explore({"w": w, "s": torch.zeros(3).to_sparse()}, compare={"w": w}, snapshot=False)
    assert ex.canvas.payload["compare"]["summary"] == (
        "1 tensors in a, 1 in b, 1 matched · no field, tie or sharing changed · 1 not compared · same"
    )


def test_a_conjugate_view_is_marked():
    z = torch.complex(torch.arange(4.0), torch.arange(4.0) + 1)
    ex = tv.explore({"c": z.conj()}, compare={"c": z.conj().resolve_conj()}, snapshot=False)
    assert ex.canvas.payload["compare"]["summary"] == "1 tensors in a, 1 in b, 1 matched · conjugate 1 · differ"
    assert ex.compare_rows.row("c").words == ("conjugate",)


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


def _slices(n: int) -> dict[str, torch.Tensor]:
    base = torch.zeros(n)
    return {f"s.{i}": base[i : i + 1] for i in range(n)}


def test_a_hover_asks_the_kernel_for_rows_not_sent():
    """A view of a whose row was not sent (past the row budget) is hovered: the browser asks
    (a custom message, names as it shows them) and the canvas answers with exactly those rows
    (the same wire form: its frame the message's buffer), with the payload's revision."""
    from tensorviz.explorer.compare import ROW_BUDGET

    a = _slices(ROW_BUDGET + 5)
    b = dict(a)
    b["s.0"] = a["s.0"].double()
    b["evil<b>\u202e"] = torch.zeros(2)
    ex = tv.explore(a, compare=b, snapshot=False)
    sent = ex.canvas.payload["compare"]
    assert (sent["total"], sent["left_out"]) == (ROW_BUDGET + 6, 6)
    assert "s.3004" not in {r.key for r in ex.compare_rows.section().rows}
    answers: list[tuple[dict, list]] = []
    ex.canvas.send = lambda content, buffers=None: answers.append((content, buffers))  # the comm: recorded
    ex.canvas._handle_custom_msg({"kind": "compare_rows", "names": ["s.3004", "s.0", "nope"]}, [])
    ((content, buffers),) = answers
    assert content["asked"] == ["s.3004", "s.0", "nope"] and content["revision"] == ex.canvas.revision
    got = _decoded({**content, "frame": buffers[0]})
    assert got["names_a"] == ["s.3004", "s.0"] and got["names_b"] == ["", ""]  # "": the same name
    assert (got["side"], got["marks"]) == ([3, 3], [0, 1 << [m[2] for m in MARKS].index("dtype")])
    assert (got["bytes_a"], got["bytes_b"]) == ([4.0, 4.0], [4.0, 8.0])
    facts = unframe(buffers[0], tuple(content["columns"]))
    assert facts["offset_a"] == facts["offset_b"] == np.array([3004.0, 0.0], "<f8").tobytes()
    ex.canvas._handle_custom_msg({"kind": "other"}, [])  # not ours: no answer
    assert len(answers) == 1


def _two_files(tmp_path) -> tuple[dict[str, torch.Tensor], str, str]:
    """a: a tied state dict; b.safetensors: what save_file writes of it with the tie cloned, the
    head in float16 and a buffer added; bad.safetensors: 8 bytes that are not a header."""
    from safetensors.torch import save_file

    emb = torch.zeros(10, 4)
    a = {"emb.weight": emb, "head.weight": emb, "mid.bias": torch.zeros(3)}
    b_path, bad = str(tmp_path / "b.safetensors"), tmp_path / "bad.safetensors"
    save_file(
        {"emb.weight": emb.clone(), "head.weight": emb.half(), "mid.bias": torch.zeros(3), "inv": torch.zeros(2)},
        b_path,
    )
    bad.write_bytes(b"\xff" * 8)
    return a, b_path, str(bad)


_FILE_ROWS = [
    ("emb.weight", "emb.weight", ("tie lost",), 160, 160),
    ("head.weight", "head.weight", ("tie lost", "dtype"), 160, 80),
    ("mid.bias", "mid.bias", (), 12, 12),
    ("inv", "inv", ("only in b",), None, 8),
]


def test_compare_with_a_path_typed(tmp_path):
    """Opened with one source, the "compare with…" row compares with a file typed (read
    header-only): the rows are exactly the diff's; "stop comparing" goes back to one source."""
    a, b_path, _ = _two_files(tmp_path)
    ex = tv.explore(a, snapshot=False)
    assert ex.compare_rows is None and "compare" not in ex.canvas.payload
    assert ex.compare_box in ex.children and ex.compare_stop.layout.display == "none"
    assert ex.compare_choice.layout.display == "none"  # no choices given: no dropdown
    ex.compare_path.value = b_path  # Enter (or leaving the field) sends the value
    assert ex.compare_rows is not None and _rows(ex.compare_rows.section()) == _FILE_ROWS
    sent = ex.canvas.payload["compare"]
    assert sent["total"] == 4 and sent["sources"][1] == b_path
    assert ex.canvas.compare_lookup == ex.compare_rows.lookup
    assert ex.compare_note.value == f'<span class="tvz-muted">comparing with {b_path}</span>'
    assert sent["summary"] == "3 tensors in a, 4 in b, 3 matched · only in b 1, tie lost 2, dtype 1 · differ"
    assert ex.compare_stop.layout.display is None
    assert ex.model_map.notes == {  # the model map's tensor cells: a line about b each
        "emb.weight": "in b: emb.weight · ≢ tie lost",
        "head.weight": "in b: head.weight · ≢ tie lost · Δ dtype",
        "mid.bias": "in b: mid.bias · no change",
    }
    ex.compare_stop.click()
    assert ex.compare_rows is None and "compare" not in ex.canvas.payload and ex.compare_note.value == ""
    assert ex.canvas.compare_lookup is None and ex.model_map.notes == {}
    ex.compare_button.click()  # the same path again, by the button
    assert _rows(ex.compare_rows.section()) == _FILE_ROWS


def test_compare_with_a_bad_path_says_why_and_keeps_the_picture(tmp_path):
    """A path that cannot be read: the library's own message, escaped, in the row (no
    traceback); the comparison shown before stays."""
    a, b_path, bad = _two_files(tmp_path)
    ex = tv.explore(a, compare=b_path, snapshot=False)
    before = ex.canvas.payload
    ex.compare_path.value = bad
    assert ex.compare_note.value == (
        f'<span class="tvz-error">⚠ could not compare with {bad}: {bad}: its first 8 bytes are not a safetensors '
        "header length (they claim more bytes than the 100000000-byte limit safetensors enforces); the file "
        "is 8 bytes, truncated, corrupt or not safetensors</span>"
    )
    assert ex.canvas.payload is before and _rows(ex.compare_rows.section()) == _FILE_ROWS
    assert isinstance(ex.last_error, tv.TensorvizError) and "Traceback" in ex.last_traceback
    missing = str(tmp_path / "<b>missing.safetensors")
    ex.compare_path.value = missing
    said = html.escape(f"could not compare with {missing}: no such file or folder: '{missing}'")
    assert ex.compare_note.value == f'<span class="tvz-error">⚠ {said}</span>'
    assert "Traceback" not in ex.compare_note.value and "<b>" not in ex.compare_note.value
    ex.compare_path.value = " "
    ex.compare_button.click()
    assert "type a path or URL to compare with" in ex.compare_note.value


def test_compare_choices_in_a_dropdown(tmp_path):
    """compare_choices: objects analysed when the explorer is built (a path kept as a path), a
    pick compares with it."""
    a, b_path, _ = _two_files(tmp_path)
    renamed = {f"module.{k}": v for k, v in a.items()}
    ex = tv.explore(a, compare_choices={"wrapped": renamed, "file": b_path}, snapshot=False)
    assert isinstance(ex.compare_choices["wrapped"], tv.Layout) and ex.compare_choices["file"] == b_path
    assert [o[0] for o in ex.compare_choice.options] == ["— a named choice —", "wrapped", "file"]
    ex.compare_choice.value = "wrapped"
    assert _rows(ex.compare_rows.section()) == [
        ("emb.weight", "module.emb.weight", ("renamed",), 160, 160),
        ("head.weight", "module.head.weight", ("renamed",), 160, 160),
        ("mid.bias", "module.mid.bias", ("renamed",), 12, 12),
    ]
    assert ex.model_map.notes["emb.weight"] == "in b: module.emb.weight · → renamed"
    ex.compare_choice.value = "file"
    assert _rows(ex.compare_rows.section()) == _FILE_ROWS
    ex.model_map.focus("mid")  # a focus keeps the notes of the cells drawn
    assert ex.model_map.notes == {"mid.bias": "in b: mid.bias · no change"}
    assert CompareRows(tv.diff({"x.a": torch.zeros(1)}, {})).note("x.a") == (
        "in b: — only in a (no tensor of b matches it by name or rule)"
    )
    with pytest.raises(TypeError, match="compare_choices must map names"):
        tv.explore(a, compare_choices=[renamed], snapshot=False)


def _reference_rows(d) -> list[tuple]:
    """The rows as the compare mode aligned and marked them before they were columns: a record
    per name, plain dictionaries (key, a-name, b-name, marks in words, kind, tags)."""
    to_a, to_b = {y: x for x, y in d.renamed}, dict(d.renamed)
    tags: dict[str, list[str]] = {}
    for x, _ in d.renamed:
        tags.setdefault(x, []).append("renamed")
    for c in d.changed:
        if c.field != "nbytes":
            tags.setdefault(c.name, []).append(c.field)
    for groups, word, back in ((d.ties_lost, "tie lost", False), (d.ties_gained, "tie gained", True)):
        for g in groups:
            for n in g:
                tags.setdefault(to_a.get(n, n) if back else n, []).append(word)
    if d.content is not None:
        for n in d.content.different:
            tags.setdefault(n, []).append("bytes differ")
    extra: dict[Any, set[str]] = {}
    ties = set(d.ties_lost) | set(d.ties_gained)
    for groups, word, side_b, skip in (
        (d.ties_lost, "tie lost", False, ()),
        (d.ties_gained, "tie gained", True, ()),
        (d.sharing_lost, "sharing lost", False, ties),
        (d.sharing_gained, "sharing gained", True, ties),
    ):
        for g in groups:
            if g not in skip:
                for n in g:
                    key: Any = to_a.get(n, n) if side_b else n
                    extra.setdefault(key if key in d.layout_a else ("b", n), set()).add(word)
    for m in d.moved:
        extra.setdefault(m.name, set()).add("moved to another file")
    rows = []
    for v in d.layout_a.views:
        if v.name in d.only_a:
            rows.append((v.name, v.name, None, {"only in a"} | extra.get(v.name, set()), "only", ("only in a",)))
            continue
        t = tuple(dict.fromkeys(tags.get(v.name, ())))
        kind = "tie" if any(x.startswith("tie") for x in t) else ("changed" if set(t) - {"renamed"} else "same")
        rows.append((v.name, v.name, to_b.get(v.name, v.name), set(t) | extra.get(v.name, set()), kind, t))
    for n in d.only_b:
        rows.append((n, None, n, {"only in b"} | extra.get(("b", n), set()), "only", ("only in b",)))
    return rows


def _mixed(seed: int) -> tuple[dict, dict]:
    """A state dict and a changed copy: renames by prefix, casts, reshapes, ties lost and
    gained, sharing lost (a row view cloned), names only on one side, in a shuffled order."""
    g = torch.Generator().manual_seed(seed)
    pick = lambda k: int(torch.randint(k, (1,), generator=g))  # noqa: E731
    a: dict[str, torch.Tensor] = {}
    for i in range(60):
        kind = pick(4)
        if kind == 0 and a:
            a[f"l{i}.tie"] = a[list(a)[pick(len(a))]]
        elif kind == 1 and a:
            base = a[list(a)[pick(len(a))]]
            a[f"l{i}.row"] = base.view(-1)[: max(1, base.numel() // 2)]
        else:
            a[f"l{i}.w"] = torch.zeros(pick(5) + 1, 3)
    prefix = "module." if seed % 2 else ""
    b: dict[str, torch.Tensor] = {}
    for name, t in a.items():
        what = pick(8)
        if what == 0:
            continue  # only in a
        t = t.half() if what == 1 else t.clone() if what == 2 else t.reshape(-1) if what == 3 else t
        b[prefix + name] = t
    b["extra.only_b"] = torch.zeros(2)
    b["extra.tie_b"] = b["extra.only_b"]
    return a, b


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_columns_align_and_mark_rows_as_a_record_per_name_did(seed, tmp_path):
    """diff_columns (and the compare rows and diff_items built on it) against the plain
    per-name alignment: every row's key, names, marks, kind and tags; also the table cases and
    a diff with content."""
    from tensorviz.render.diff import diff_columns

    bits = {w: 1 << k for k, (_, _, w, _) in enumerate(MARKS)}
    diffs = [tv.diff(*_mixed(seed))]
    if seed == 0:
        for k, (build, _) in CASES.items():
            folder = tmp_path / k.replace(" ", "_")
            folder.mkdir()
            diffs.append(tv.diff(*build(str(folder))))
        a = {"same": torch.ones(4), "changed": torch.ones(4)}
        diffs.append(tv.diff(a, {"same": torch.ones(4), "changed": torch.full((4,), 2.0)}, content=True))
    for d in diffs:
        want = _reference_rows(d)
        rows = CompareRows(d, budget=10**6)
        got = [(r.key, r.name_a, r.name_b, r.marks, r.kind) for r in rows.section().rows]
        assert got == [(k, x, y, sum(bits[w] for w in words), kind) for k, x, y, words, kind, _ in want]
        assert [(n, f[2], f[3]) for n, f in diff_items(d)] == [(k, t, kind) for k, _, _, _, kind, t in want]
        c = diff_columns(d)
        assert c.row_of_b.tolist() == [
            next(r for r, (_, _, y, *_) in enumerate(want) if y == n) for n in d.layout_b.names
        ]
    assert any(r[3] - {"only in a", "only in b", "renamed"} for r in _reference_rows(diffs[0]))  # changes to align
