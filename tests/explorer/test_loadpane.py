"""The explorer's load-check pane (``tv.explore(model, load=source)``), driven in-process.

Each scenario's pane payload is asserted exactly, then the load is really done on the very model
and source, and what the pane shows must be what happened: raises or not and the message's first
line, missing and unexpected keys (torch's own lists), the conflict's winner (``torch.equal`` after
the load), the casts (the loaded values equal the source cast to the model's dtype) and the
untouched names (equal to their values before the load). The canvas marks (one code per drawn
view) and a click on a row (the explorer's one selection) are checked too.
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import json
import weakref
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("ipywidgets")

import tensorviz as tv  # noqa: E402
from tensorviz.core.errors import OptionError  # noqa: E402
from tensorviz.explorer.loadpane import CHOICES, LoadSubject, applicable, load_section, mark_codes  # noqa: E402
from tests.helpers.models import TiedLM  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Untied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(50, 16)
        self.ln = nn.LayerNorm(16)
        self.lm_head = nn.Linear(16, 50, bias=False)


def _sd(model: nn.Module, prefix: str = "") -> collections.OrderedDict:
    torch.manual_seed(123)
    return collections.OrderedDict((prefix + k, torch.randn(v.shape)) for k, v in model.state_dict().items())


def _model(cls: type) -> nn.Module:
    torch.manual_seed(0)
    return cls()


def _really_load(model: nn.Module, sd: Any, strict: bool) -> tuple[str | None, list, list]:
    """The real load: its error's first line, and torch's missing and unexpected keys."""
    seen: dict[str, list] = {}
    model.register_load_state_dict_post_hook(
        lambda m, keys: seen.update(missing=list(keys.missing_keys), unexpected=list(keys.unexpected_keys))
    )
    try:
        model.load_state_dict(sd, strict=strict)
    except RuntimeError as err:
        return f"{type(err).__name__}: {err}".splitlines()[0], seen["missing"], seen["unexpected"]
    return None, seen["missing"], seen["unexpected"]


def _rows(payload: dict) -> dict[str, list]:
    return {lst["kind"]: lst["rows"] for lst in payload["lists"]}


def test_tied_model_from_an_untied_checkpoint() -> None:
    """Two source tensors feed one tied Parameter: a conflict, won by the last in state-dict order."""
    model, sd = _model(TiedLM), _sd(Untied())
    ex = tv.explore(model, load=sd, snapshot=False)
    p = ex.load_pane.section
    assert p == {
        "choice": "load_state_dict",
        "choices": [[c.key, c.call] for c in CHOICES if c.loader == "load_state_dict"],
        "source": "OrderedDict of 4 entries",
        "raises": False,
        "verdict": "does not raise: not clean (see the lists)",
        "clean": False,
        "narrowing": 0,
        "lists": [
            {
                "kind": "conflicts",
                "title": "conflicts: shared bytes fed twice",
                "count": 1,
                "rows": [["wte.weight = lm_head.weight  winner: lm_head.weight", True]],
            }
        ],
        "fixes": [
            [
                "the tie wte.weight = lm_head.weight is fed 2 tensors: feed it 'wte.weight'",
                "state_dict['lm_head.weight'] = state_dict['wte.weight']\nmodel.load_state_dict(state_dict)",
            ]
        ],
        "marks": {"untouched": 0, "cast": 0},
    }
    assert ex.canvas.load_marks == {"code": b"", "kinds": ["untouched", "cast"]}
    ex.load_pane._handle_custom_msg({"pick": ["conflicts", 0]}, [])
    assert ex.selected == ["wte.weight", "lm_head.weight"] and ex.load_pane.highlight == [["conflicts", 0]]
    error, missing, unexpected = _really_load(model, sd, strict=True)
    assert (error, missing, unexpected) == (None, [], [])
    assert torch.equal(model.wte.weight, sd["lm_head.weight"]) and not torch.equal(model.wte.weight, sd["wte.weight"])


def test_module_prefix_raises_and_leaves_everything_untouched() -> None:
    model, sd = _model(TiedLM), _sd(TiedLM(), "module.")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ex = tv.explore(model, load=sd, snapshot=False)
    p = ex.load_pane.section
    names = ["wte.weight", "ln.weight", "ln.bias", "lm_head.weight"]
    assert (p["raises"], p["verdict"]) == (True, "raises RuntimeError: Error(s) in loading state_dict for TiedLM:")
    assert _rows(p) == {
        "missing": [[n, True] for n in names],
        "unexpected": [["module." + n, False] for n in names],
        "untouched": [[n, True] for n in names],
    }
    assert p["fixes"] == [
        [
            "the checkpoint's keys carry the prefix 'module.': strip it",
            "state_dict = {k.removeprefix('module.'): v for k, v in state_dict.items()}\nmodel.load_state_dict(state_dict)",
        ]
    ]
    assert p["marks"] == {"untouched": 4, "cast": 0}
    # the untouched LayerNorm was folded into the simple-storages row: the pane expands it to mark it
    assert ex.state.expand_simple and ex.canvas.drawn_names == ["wte.weight", "lm_head.weight", "ln.weight", "ln.bias"]
    assert ex.canvas.load_marks == {"code": bytes([1, 1, 1, 1]), "kinds": ["untouched", "cast"]}
    ex.load_pane._handle_custom_msg({"pick": ["missing", 1]}, [])  # a click on "ln.weight"
    assert ex.selected == ["ln.weight"] and ex.load_pane.highlight == [["missing", 1], ["untouched", 1]]
    ex.load_pane._handle_custom_msg({"pick": ["unexpected", 0]}, [])  # not a model name: nothing changes
    assert ex.selected == ["ln.weight"]
    ex.name_filter.value = "wte"  # ln.bias filtered out of the picture: a click draws its storage
    assert "ln.bias" not in ex.canvas.drawn_names
    ex.load_pane._handle_custom_msg({"pick": ["untouched", 2]}, [])
    assert ex.selected == ["ln.bias"] and ex.state.names == "" and ex.last_error is None
    error, missing, unexpected = _really_load(model, sd, strict=True)
    assert error == p["verdict"].removeprefix("raises ")
    assert [missing, unexpected] == [[r[0] for r in _rows(p)[k]] for k in ("missing", "unexpected")]
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # untouched, as shown


def test_fp32_checkpoint_into_a_bf16_model_and_the_loader_picker() -> None:
    model, sd = _model(Untied).bfloat16(), _sd(Untied())
    ex = tv.explore(model, load=sd, loader="load_state_dict(strict=False)", snapshot=False)
    p = ex.load_pane.section
    names = ["wte.weight", "ln.weight", "ln.bias", "lm_head.weight"]
    assert (p["choice"], p["raises"], p["verdict"]) == (
        "load_state_dict(strict=False)",
        False,
        "does not raise: clean; casts 4 tensors (4 narrowing)",
    )
    assert p["narrowing"] == 4
    assert _rows(p) == {"cast": [[f"{n}  float32 → bfloat16  (narrowing)", True] for n in names]}
    assert p["marks"] == {"untouched": 0, "cast": 4} and p["fixes"] == []
    assert ex.canvas.load_marks["code"] == mark_codes(ex.canvas.drawn_names, dict.fromkeys(names, "cast"))
    assert set(ex.canvas.load_marks["code"]) == {2}
    ex.load_pane.choice = "load_state_dict(assign=True)"  # the picker: assign=True converts nothing
    assert ex.load_pane.section["verdict"] == "does not raise: clean" and ex.load_pane.section["lists"] == []
    assert ex.canvas.load_marks["code"] == b""  # nothing marked
    ex.load_pane.choice = "load_state_dict(strict=False)"
    assert ex.load_pane.section == p  # each loader's report computed once, shown again as it was
    error, _, _ = _really_load(model, sd, strict=False)
    assert error is None
    assert all(p.dtype == torch.bfloat16 and torch.equal(p, sd[n].bfloat16()) for n, p in model.state_dict().items())


def test_a_safetensors_file_offers_load_model_and_is_read_header_only(tmp_path) -> None:
    from safetensors.torch import save_model

    path = str(tmp_path / "m.safetensors")
    save_model(_model(TiedLM), path)  # writes one name of the tie (and the alias in its metadata)
    model = _model(TiedLM)
    assert applicable(model, path)[-1] == "safetensors.load_model"
    ex = tv.explore(model, load=path, loader="safetensors.load_model", snapshot=False)
    p = ex.load_pane.section
    assert (p["verdict"], p["lists"], p["source"]) == ("does not raise: clean", [], path)
    ex.load_pane.choice = "load_state_dict"
    assert ex.load_pane.section["verdict"] == "raises RuntimeError: Error(s) in loading state_dict for TiedLM:"
    assert _rows(ex.load_pane.section)["missing"] == [["wte.weight", True]]  # save_model kept lm_head.weight
    from safetensors.torch import load_file, load_model

    assert load_model(model, path) == (set(), [])  # the real calls: load_model is clean,
    error, missing, unexpected = _really_load(_model(TiedLM), load_file(path), strict=True)
    assert (error, missing, unexpected) == (ex.load_pane.section["verdict"].removeprefix("raises "), ["wte.weight"], [])


def test_the_pane_keeps_neither_the_model_nor_the_source() -> None:
    model, sd = _model(TiedLM), _sd(TiedLM(), "module.")
    ex = tv.explore(model, load=sd, snapshot=False)
    model_ref = __import__("weakref").ref(model)
    del model, sd
    gc.collect()
    assert model_ref() is None
    ex.load_pane.choice = "load_state_dict(strict=False)"
    assert ex.load_pane.section["verdict"] == (
        "the check failed: ReferenceError: the model or the source was deleted: run tv.load_check(model, source) again"
    )


def _facts(report: Any) -> tuple:
    """Every field of a LoadReport (frozen, compared by identity): what the pane can show."""
    return tuple(getattr(report, f.name) for f in dataclasses.fields(report))


def _plain_dicts() -> dict[str, tuple[nn.Module, dict]]:
    """Plain-dict sources: a ``module.`` prefix (raises), an untied checkpoint into a tied model
    (a conflict), fp32 into bf16 (casts), and a dict whose two names share one tensor."""
    bf16 = _model(TiedLM).to(torch.bfloat16)
    shared = dict(_sd(TiedLM()))
    shared["lm_head.weight"] = shared["wte.weight"]
    return {
        "prefix": (_model(TiedLM), dict(_sd(TiedLM(), "module."))),
        "untied": (_model(TiedLM), dict(_sd(Untied()))),
        "cast": (bf16, dict(_sd(TiedLM()))),
        "shared": (_model(Untied), shared),
    }


@pytest.mark.parametrize("case", sorted(_plain_dicts()))
def test_a_plain_dict_source_is_checked_when_picked_with_its_own_reports(case) -> None:
    """A plain dict cannot be weakly referenced: the pane holds its layout (no tensor), computes
    a report only when its loader is picked, and each equals tv.load_check on the dict itself."""
    model, sd = _plain_dicts()[case]
    expected = {
        c.key: _facts(tv.load_check(model, sd, loader=c.loader, strict=c.strict, assign=c.assign))
        for c in CHOICES
        if c.loader == "load_state_dict"
    }
    subject = LoadSubject(model, sd)
    assert subject.computed == ()
    tensor = weakref.ref(next(iter(sd.values())))
    del sd
    gc.collect()
    assert tensor() is None  # the pane keeps no tensor of the source
    order = ["load_state_dict(assign=True)", "load_state_dict", "load_state_dict(strict=False)"]
    for i, key in enumerate(order):
        assert _facts(subject.report(key)) == expected[key], key
        assert subject.computed == tuple(order[: i + 1])


def test_the_explorer_checks_only_the_loader_shown() -> None:
    model, sd = _model(TiedLM), dict(_sd(TiedLM(), "module."))
    ex = tv.explore(model, load=sd, snapshot=False)
    assert ex.load_subject.computed == ("load_state_dict",)
    ex.load_pane.choice = "load_state_dict(strict=False)"
    assert ex.load_subject.computed == ("load_state_dict", "load_state_dict(strict=False)")
    assert ex.load_pane.section["verdict"] == "does not raise: not clean (see the lists)"


def test_a_dict_the_layout_cannot_stand_for_is_checked_up_front() -> None:
    """A value that is not a plain tensor is read from the dict by the check (torch judges it):
    such a dict is still checked up front, for every loader, and kept by no one."""
    model = _model(TiedLM)
    sd = dict(_sd(TiedLM()), extra=3)
    subject = LoadSubject(model, sd)
    assert subject.computed == applicable(model, sd)
    del sd
    gc.collect()
    assert subject.report("load_state_dict").unexpected == ("extra",)  # type: ignore[union-attr]


def test_a_loader_that_does_not_apply_is_refused_naming_those_that_do() -> None:
    with pytest.raises(
        OptionError, match=r"loader='dcp.load' does not apply to this source; these do: load_state_dict, "
    ):
        tv.explore(_model(TiedLM), load={"w": torch.zeros(1)}, loader="dcp.load", snapshot=False)


def test_hostile_names_are_sent_escaped() -> None:
    evil = "x\x1b[31m<script>alert(1)</script>\u202e"
    model = _model(TiedLM)
    r = tv.load_check(model, {evil: torch.zeros(1)}, strict=False)
    s = load_section(r, "load_state_dict(strict=False)", applicable(model, {}), frozenset(), evil)
    text = json.dumps(s.to_json(), ensure_ascii=False)
    assert "\x1b" not in text and "\u202e" not in text
    assert _rows(s.to_json())["unexpected"] == [["x\\x1b[31m<script>alert(1)</script>\\u202e", False]]


def test_a_dcp_folder_offers_dcp_load_and_marks_its_casts(tmp_path) -> None:
    """A bf16 model and a fp32 DCP checkpoint: dcp.load casts every tensor; the pane lists the
    casts and the bytes read per file, as the real dcp.load then reads and casts."""
    import torch.distributed.checkpoint as dcp

    from tests.helpers.dcp_load_worker import Recording

    folder = str(tmp_path / "ckpt")
    dcp.save(_sd(Untied()), checkpoint_id=folder)
    model = _model(Untied).bfloat16()
    assert applicable(model, folder) == ("dcp.load", "dcp.load(allow_partial_load)")
    ex = tv.explore(model, load=folder, snapshot=False)
    p = ex.load_pane.section
    names = ["wte.weight", "ln.weight", "ln.bias", "lm_head.weight"]
    assert (p["choice"], p["verdict"]) == ("dcp.load", "does not raise: clean; casts 4 tensors (4 narrowing)")
    reader = Recording(folder)
    target = model.state_dict()
    dcp.load(target, storage_reader=reader)  # the real load
    nbytes = sum(r[5] for r in {tuple(map(str, r)): r for r in reader.seen}.values())
    assert _rows(p) == {
        "cast": [[f"{n}  float32 → bfloat16  (narrowing)", True] for n in names],
        "files": [[f"__0_0.distcp  {tv.core.units.format_bytes(nbytes)} ({nbytes:,} B)", False]],
    }
    assert {r[3] for r in reader.seen} == {"__0_0.distcp"}
    assert p["marks"] == {"untouched": 0, "cast": 4}
    sd = _sd(Untied())
    assert all(torch.equal(model.state_dict()[n], sd[n].bfloat16()) for n in names)


def test_a_model_folder_offers_from_pretrained_first(tmp_path) -> None:
    """A tiny GPT-2 saved with save_pretrained: the pane starts on from_pretrained; a model whose
    config ties what the files hold apart gets the pane's 'not tied' row and the fix, which the
    real from_pretrained (with the fix's keyword) then loads clean."""
    from tests.helpers.models import tiny_gpt2

    folder = str(tmp_path / "gpt2")
    tiny_gpt2(tied=False).save_pretrained(folder)
    model = tiny_gpt2(tied=True)
    assert applicable(model, folder)[0] == "from_pretrained"
    ex = tv.explore(model, load=folder, snapshot=False)
    p = ex.load_pane.section
    assert (p["choice"], p["verdict"]) == ("from_pretrained", "does not raise: not clean (see the lists)")
    assert _rows(p) == {"not_tied": [["lm_head.weight ≠ transformer.wte.weight", True]]}
    assert p["fixes"] == [
        [
            "the config ties weights the files hold apart, with different values: keep both",
            "model = GPT2LMHeadModel.from_pretrained(folder, tie_word_embeddings=False)",
        ]
    ]
    real, info = type(model).from_pretrained(folder, tie_word_embeddings=False, output_loading_info=True)
    assert (info["missing_keys"], info["unexpected_keys"], info["mismatched_keys"]) == (set(), set(), set())
    assert real.lm_head.weight is not real.transformer.wte.weight
