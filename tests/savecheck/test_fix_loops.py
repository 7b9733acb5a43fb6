"""A fix plan's repeated statements as loops (tensorviz/savecheck/loops.py): the folded code does
exactly what the statements one by one do (run both, hypothesis drawing the layers), and a real
many-layer model's fix is a few loops that really save and load back bit for bit."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import tensorviz as tv
from tensorviz.savecheck.loops import fold_statements

#: Statement kinds a plan writes, over a layer number (and a second one: a cross-layer tie).
KINDS = [
    "del d['h.{i}.q']  # a view into h.{i}.qkv: rebuilt after loading",
    "d['h.{i}.v'] = d['h.{i}.w']",
    "d['h.{i}.t'] = d['h.{i}.w'] + 0.5  # h.{i}.w's bytes, rearranged",
    "d['h.{i}.x'] = d['h.{j}.w']",
    "d['odd{{x}}.{i}.w'] = 1",
    "d['a\\\\b.{i}.w'] = 2",
    "d['h.{i}.0.w'] = 3",
    "d['h.\u0663.{i}.w'] = 4",  # an Arabic-Indic digit: a name part, not a layer number
]


def run(lines: list[str]) -> dict:
    d = {f"h.{i}.{p}": float(i) for i in range(60) for p in ("q", "w")}
    exec("\n".join(lines), {"d": d})  # noqa: S102 - the statements under test
    return d


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(range(len(KINDS))), st.sets(st.integers(0, 40), max_size=25)),
        min_size=1,
        max_size=5,
        unique_by=lambda kind: kind[0],
    ),
    st.integers(2, 4),
)
def test_folded_code_does_what_the_statements_do(kinds: list[tuple[int, set[int]]], least: int) -> None:
    lines = [KINDS[k].format(i=i, j=(i + 1) % 41) for k, layers in kinds for i in sorted(layers)]
    folded = fold_statements(lines, least)
    assert run(folded) == run(lines)
    assert len(folded) <= len(lines) + 3 * len(kinds)


def test_loops_over_ranges_gaps_and_lists() -> None:
    line = "del d['h.{i}.q']"
    assert fold_statements([line.format(i=i) for i in (3, 4, 5, 6)]) == [
        "for i in range(3, 7):",
        "    del d[f'h.{i}.q']",
    ]
    assert fold_statements([line.format(i=i) for i in range(0, 40) if i % 5]) == [
        "for i in sorted(set(range(1, 40)) - set(range(5, 36, 5))):",
        "    del d[f'h.{i}.q']",
    ]
    assert fold_statements([line.format(i=i) for i in (1, 4, 9, 16)]) == [
        "for i in (1, 4, 9, 16):",
        "    del d[f'h.{i}.q']",
    ]
    padded = [line.format(i=i) for i in ("007", "008", "009")]
    assert fold_statements(padded) == padded  # f"{i}" would write 7, not 007
    indic = [f"del d['h.{d}.q']" for d in "\u0661\u0662\u0663"]  # int() reads them, f"{i}" would not write them
    assert fold_statements(indic) == indic
    cross = ["d['h.1.x'] = d['h.2.w']", "d['h.2.x'] = d['h.3.w']", "d['h.3.x'] = d['h.4.w']"]
    assert fold_statements(cross) == cross


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.q, self.k = nn.Linear(8, 8), nn.Linear(8, 8)
        self.q.weight = nn.Parameter(self.qkv.weight[:8])  # rows 0-7 of qkv.weight
        self.k.weight = nn.Parameter(self.qkv.weight[8:16])


def test_a_twelve_layer_models_fix_is_loops_that_round_trip(tmp_path) -> None:
    torch.manual_seed(0)
    model = nn.Module()
    model.layers = nn.ModuleList(Layer() for _ in range(12))
    (fix,) = [f for f in tv.save_check(model)["safetensors.save_file"].fixes if "leave out" in f.title]
    code = fix.code(str(tmp_path / "fixed.safetensors"))
    assert (
        "for i in range(12):\n"
        "    del fixed[f'layers.{i}.q.weight']  # a view into layers.{i}.qkv.weight: rebuilt after loading\n"
        "    del fixed[f'layers.{i}.k.weight']  # a view into layers.{i}.qkv.weight: rebuilt after loading\n"
        "save_file(fixed, path)"
    ) in code
    assert len(code.splitlines()) < 15 and len(fix.load_code.splitlines()) < 15
    assert fix.title.startswith("leave out layers.0.q.weight, layers.0.k.weight, layers.1.q.weight and 21 more")
    exec(code, {"model": model})  # noqa: S102 - the suggested fix, run
    back: dict = {"path": str(tmp_path / "fixed.safetensors"), "model": model}
    exec(fix.load_code, back)  # noqa: S102
    for name, t in model.state_dict().items():
        assert torch.equal(back["state_dict"][name], t), name
    assert back["state_dict"]["layers.5.q.weight"].untyped_storage().data_ptr() == (
        back["state_dict"]["layers.5.qkv.weight"].untyped_storage().data_ptr()
    )
