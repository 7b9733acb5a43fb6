"""What a diff shows: print(d) (one screen, 80 columns, folded layers, escaped names), its HTML
(escaped, no JavaScript), tv.show(d) (rows aligned, changes marked by hatch and words, not by
colour alone) and the CLI ``tensorviz diff`` (exit status 0 / 1 / 2, JSON, header-only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import tensorviz as tv
from tensorviz.cli import main
from tensorviz.render.diff import STYLES, diff_figure, diff_rows

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

HOSTILE = "w\x1b[31m\nStorage #9 <b>&amp;</b> \u202eexe.txt"


def _layers(n: int, dtype: torch.dtype = torch.float32, prefix: str = "") -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    out = {}
    for i in range(n):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "mlp.up_proj", "mlp.down_proj"):
            out[f"{prefix}model.layers.{i}.{part}.weight"] = torch.randn(8, 4).to(dtype)
    out[f"{prefix}lm_head.weight"] = torch.randn(10, 4)
    return out


def test_text_fits_a_screen_and_80_columns_with_folded_layers() -> None:
    d = tv.diff(_layers(32), _layers(32, torch.bfloat16, prefix="module."))
    text = str(d)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80
    assert len(lines) <= 40
    assert "names matched by rule: 129 names matched with prefix 'module.' removed from b" in lines
    assert "  model.layers.{0…31}.mlp.up_proj.weight  (32×)" in lines
    assert "      dtype float32 → bfloat16, nbytes 128 → 64" in lines
    assert lines[-1] == "differ"


def test_text_and_html_escape_hostile_names() -> None:
    d = tv.diff({HOSTILE: torch.zeros(2)}, {HOSTILE: torch.zeros(3)})
    text = str(d)
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[31m\\nStorage" in text
    assert max(map(len, text.splitlines())) <= 80
    page = d._repr_html_()
    assert "<script" not in page.lower() and "<b>&amp;</b>" not in page
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in page and "\\u202e" in page


def test_same_layouts_say_so() -> None:
    d = tv.diff(_layers(2), _layers(2))
    assert d.same and str(d).splitlines()[-1] == "same" and "<b>same</b>" in d._repr_html_()


def test_values_not_analysed_are_said_not_compared() -> None:
    """A value a side holds that cannot be analysed (a sparse tensor, a name repeated, a
    container holding itself) is listed with its side and reason in the text, the HTML and the
    JSON; "same" then says it is of the tensors compared."""
    w = torch.zeros(4)
    cyclic: dict = {"0": w}
    cyclic["self"] = cyclic
    d = tv.diff({0: w, "0": w.clone(), "s<b>": torch.zeros(3).to_sparse()}, cyclic)
    assert d.same and d.not_compared == (  # as each side lists them: read in the walk, then repeated
        ("a", "s<b>", d.layout_a.skipped[0].reason),
        ("a", "0", "duplicate name: an earlier value already has this name"),
        ("b", "self", d.layout_b.skipped[0].reason),
    )
    assert d.layout_a.skipped[0].reason.startswith("sparse_coo tensor")
    lines = str(d).splitlines()
    assert lines[3] == "not compared (could not be analysed) (3):"
    assert lines[6] == "  0  a: duplicate name: an earlier value already has this name"
    assert lines[-1] == "same, of the tensors compared (3 values not compared)"
    html = d._repr_html_()
    assert "<b>same, of the tensors compared (3 values not compared)</b>" in html
    assert "<code>s&lt;b&gt;</code>" in html and "s<b>" not in html
    doc = json.loads(json.dumps(d.to_json()))
    assert doc["not_compared"][1] == {
        "side": "a",
        "name": "0",
        "reason": "duplicate name: an earlier value already has this name",
    }
    assert [(x["side"], x["name"]) for x in doc["not_compared"]] == [("a", "s<b>"), ("a", "0"), ("b", "self")]
    plain = tv.diff({"w": w}, {"w": w})
    assert plain.not_compared == () and str(plain).splitlines()[-1] == "same" and plain.to_json()["not_compared"] == []


def test_json_is_plain_and_complete() -> None:
    w = torch.zeros(4)
    d = tv.diff({"a": w, "b": w}, {"a": w.clone(), "b": w.clone(), "c": w})
    doc = json.loads(json.dumps(d.to_json()))
    assert doc["schema"] == "tensorviz.diff" and doc["same"] is False
    assert doc["only_b"] == ["c"] and doc["ties_lost"] == [["a", "b"]] and doc["changed"] == []


def test_show_aligns_names_and_marks_changes_without_colour_alone() -> None:
    a = _layers(6)
    b = {k: (v.half() if "mlp" in k else v) for k, v in _layers(6).items() if k != "lm_head.weight"}
    b["extra"] = torch.zeros(3)
    d = tv.diff(a, b)
    rows, left_out = diff_rows(d)
    got = [(r.label, r.a, r.b, r.tags, r.kind, r.count) for r in rows]
    assert left_out == 0
    assert got == [
        ("model.layers.{0…5}.self_attn.q_proj.weight", 128, 128, (), "same", 6),
        ("model.layers.{0…5}.self_attn.k_proj.weight", 128, 128, (), "same", 6),
        ("model.layers.{0…5}.mlp.up_proj.weight", 128, 64, ("dtype",), "changed", 6),
        ("model.layers.{0…5}.mlp.down_proj.weight", 128, 64, ("dtype",), "changed", 6),
        ("lm_head.weight", 160, None, ("only in a",), "only", 1),
        ("extra", None, 12, ("only in b",), "only", 1),
    ]
    fig = diff_figure(d)
    ax = fig.axes[0]
    bars = [p for p in ax.patches]
    assert [p.get_hatch() or "" for p in bars] == ["", "", "", "", "//", "//", "//", "//", "xx", "xx"]
    assert {p.get_linestyle() for p in bars if p.get_hatch() == "xx"} == {"dotted"}  # a dotted edge too
    words = [t.get_text() for t in ax.texts]
    assert words.count("dtype") == 2 and "only in a" in words and "only in b" in words
    # a's bars grow leftwards from x = -1, b's rightwards from x = 1, a row per name on both
    for p in bars:
        x0, x1 = sorted((p.get_x(), p.get_x() + p.get_width()))
        assert x1 == pytest.approx(-1.0) or x0 == pytest.approx(1.0)
    assert set(STYLES) == {"same", "changed", "tie", "only"}
    shown = tv.show(d)
    assert shown.png[:4] == b"\x89PNG" and set(shown._repr_mimebundle_()) == {"image/png", "text/html", "text/plain"}


def test_show_puts_changed_rows_first_when_they_do_not_all_fit() -> None:
    a = {f"t{i}": torch.zeros(i + 1) for i in range(50)}
    b = dict(a, t42=torch.zeros(3).double())
    rows, left_out = diff_rows(tv.diff(a, b), max_rows=10)
    assert len(rows) == 10 and left_out == 40 and ("t42", 172, 24) in [(r.label, r.a, r.b) for r in rows]


@pytest.fixture
def two_files(tmp_path) -> tuple[str, str, str]:
    from safetensors.torch import save_file

    paths = [str(tmp_path / f"{k}.safetensors") for k in "abc"]
    save_file(_layers(4), paths[0])
    save_file(_layers(4), paths[1])
    save_file(_layers(4, torch.float16), paths[2])
    return paths[0], paths[1], paths[2]


def test_cli_exit_status_and_output(two_files, capsys) -> None:
    a, same, other = two_files
    assert main(["diff", a, same]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "same"
    assert main(["diff", a, other]) == 1
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80 and out.splitlines()[-1] == "differ"
    assert main(["diff", a, other, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(json.dumps(tv.diff(a, other).to_json()))
    assert main(["diff", a, other, "--content", "--json"]) == 1
    assert "content" in json.loads(capsys.readouterr().out)
    assert main(["diff", a, a + ".missing"]) == 2
    assert "tensorviz diff: error:" in capsys.readouterr().err
    assert main(["diff", a]) == 2


def test_cli_diff_of_files_is_header_only(two_files) -> None:
    a, _, other = two_files
    code = (
        "import sys\nfrom tensorviz.cli import main\n"
        f"status = main(['diff', {a!r}, {other!r}])\n"
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules, 'imported'\n"
        "sys.exit(status)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1, done.stderr


def test_every_section_full_still_fits_a_screen() -> None:
    n = 300
    base = torch.zeros(n * 4)
    a = {f"layers.{i}.w": base[4 * i : 4 * i + 4] for i in range(n)}  # one storage: sharing
    a |= {f"layers.{i}.tied": a[f"layers.{i}.w"] for i in range(n)}  # ties
    a |= {f"a_only.{i}.x{i % 7}": torch.zeros(i + 1) for i in range(n)}
    b = {f"module.layers.{i}.w": torch.zeros(5 if i % 2 else 4).double() for i in range(n)}
    b |= {f"module.layers.{i}.tied": torch.zeros(5 if i % 2 else 4).double() for i in range(n)}
    b |= {f"b_only.{i}.y{i % 5}": torch.zeros(i + 2) for i in range(n)}
    d = tv.diff(a, b)
    lines = str(d).splitlines()
    assert d.only_a and d.only_b and d.renamed and d.changed and d.ties_lost and d.sharing_lost
    assert len(lines) <= 60 and max(map(len, lines)) <= 80


def test_a_buffer_state_dict_leaves_out_is_said_so(tmp_path) -> None:
    from safetensors.torch import save_file

    class WithRotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.register_buffer("inv_freq", torch.ones(2), persistent=False)

    model = WithRotary()
    path = str(tmp_path / "m.safetensors")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path)
    d = tv.diff(model, path)
    assert d.only_a == ("inv_freq",)
    assert "  inv_freq  buffer, not in state_dict()" in str(d).splitlines()


def test_a_long_group_takes_a_line_per_name_and_no_line_is_blank() -> None:
    """A tie of three long names: each on its own line (cut at dots only when still too long),
    never a middle cut of the joined group, never a line of spaces where no tail is."""
    w = torch.zeros(8)
    names = ["model.encoder.layers.0.attention.self.query_key_value.weight", "model.decoder.embed_tokens.weight"]
    a = {names[0]: w, names[1]: w, "x" * 90: w}
    b = {names[0]: w, names[1]: w.clone(), "x" * 90: w.clone()}
    lines = str(tv.diff(a, b)).splitlines()
    at = lines.index("ties lost (tied in a, not in b) (1):")
    assert lines[at + 1 : at + 4] == [
        "  model.encoder.layers.0.attention.self.query_key_value.weight =",
        "    model.decoder.embed_tokens.weight =",
        "    " + "x" * 37 + "…" + "x" * 38,
    ]
    assert all(line.strip() for line in lines) and max(map(len, lines)) <= 80
