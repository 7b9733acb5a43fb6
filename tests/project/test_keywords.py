"""The public functions' options: keyword parameters with documented docstrings, unknown
keywords and values answered in the name of the function called with the closest valid one,
the explorer's labels accepted as values, options that cannot apply refused with the fix."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

import tensorviz as tv
from tensorviz.core.errors import OptionError, UnknownOptionError
from tensorviz.loadcheck.check import LOADERS
from tensorviz.plan.options import LABELS, OPTION_DOCS, by_value
from tests.helpers.models import seed_tensors

PUBLIC = [name for name in tv.__all__ if callable(getattr(tv, name)) and not isinstance(getattr(tv, name), type)]


def test_the_public_functions_are_the_ones_listed():
    assert PUBLIC == [
        "analyze",
        "diagram",
        "show",
        "explain",
        "explain_view",
        "explain_packing",
        "explore",
        "export_html",
        "save_check",
        "why_size",
        "diff",
        "load_check",
        "load_plan",
        "limits",
    ]


def _args_section(doc: str) -> str:
    return doc.split("Args:", 1)[1].split("\n\n    Returns:", 1)[0].split("\n    Returns:", 1)[0]


@pytest.mark.parametrize("name", PUBLIC)
def test_every_option_is_a_documented_keyword(name):
    fn = getattr(tv, name)
    params = inspect.signature(fn).parameters.values()
    assert not [p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD], f"tv.{name} takes **options"
    doc = inspect.getdoc(fn) or ""
    assert "Args:" in doc and ">>> " in doc, f"tv.{name} needs an Args section and an example"
    args = _args_section(doc)
    for p in params:
        written = ("*" if p.kind is inspect.Parameter.VAR_POSITIONAL else "") + p.name
        assert re.search(rf"^    {re.escape(written)}: \S", args, re.M), f"tv.{name}: {written} is not documented"


#: Options a function describes in its own words: tv.explore's zoom needs its storage=, and its
#: max_lanes also limits the live canvas (None: every lane).
OWN_WORDS = {("explore", "byte_range"), ("explore", "max_lanes")}


def test_shared_options_are_written_once_and_have_one_default():
    flat = {n: " ".join(inspect.getdoc(getattr(tv, n)).split()) for n in ("diagram", "show", "explore")}
    for option, text in OPTION_DOCS.items():
        users = [n for n in flat if option in inspect.signature(getattr(tv, n)).parameters]
        for n in users:
            if (n, option) not in OWN_WORDS:
                assert f"{option}: {' '.join(text.split())}" in flat[n], (n, option)
            args = _args_section(inspect.getdoc(getattr(tv, n)))
            assert len(re.findall(rf"^    {option}: ", args, re.M)) == 1, (n, option)  # described once
    diagram = inspect.signature(tv.diagram).parameters
    for n in ("show", "explore"):
        for p in inspect.signature(getattr(tv, n)).parameters.values():
            if p.name in diagram and p.name != "layout_or_obj" and (n, p.name) != ("explore", "max_lanes"):
                assert p.default == diagram[p.name].default, (n, p.name)
    assert inspect.signature(tv.show).parameters["width"].default is None
    assert (
        inspect.signature(tv.explore).parameters["dpi"].default == inspect.signature(tv.show).parameters["dpi"].default
    )


SHOW_OPTIONS = (
    "by, names, storages, only_shared, byte_range, max_lanes, show_unreferenced, expand_simple, overview, "
    "color_by, dpi, width, max_rows"
)
BY_CHOICES = (
    "by must be one of ('storage', 'span', 'overlap'), 'category' for training state, or 'rank' / "
    "'mesh:<dim>' for a sharded model, got"
)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda m: tv.show(m, by_="span"),
            UnknownOptionError,
            f"tv.show() got an unexpected keyword argument 'by_'; did you mean 'by'? Its options: {SHOW_OPTIONS}",
        ),
        (lambda m: tv.show(m, by="spam"), OptionError, f"tv.show(): {BY_CHOICES} 'spam'; did you mean 'span'?"),
        (
            lambda m: tv.diagram(m, by="overlp"),
            OptionError,
            f"tv.diagram(): {BY_CHOICES} 'overlp'; did you mean 'overlap'?",
        ),
        (lambda m: tv.show(m, by="bytes"), OptionError, f"tv.show(): {BY_CHOICES} 'bytes'"),
        (
            lambda m: tv.show(m, color_by="rnak"),
            OptionError,
            "tv.show(): color_by must be 'category', 'rank' or 'mesh:<dim>' (or None), got 'rnak'; did you mean 'rank'?",
        ),
        (
            lambda m: tv.save_check(m, saver=["torch.save"]),
            UnknownOptionError,
            "tv.save_check() got an unexpected keyword argument 'saver'; did you mean 'savers'? Its options: savers",
        ),
        (
            lambda m: tv.save_check(m, savers=["torch.sav"]),
            OptionError,
            "tv.save_check(): unknown saver(s) ['torch.sav']; choose from ['safetensors.save_file', "
            "'safetensors.save_model', 'torch.save', 'transformers.save_pretrained', 'peft.save_pretrained', "
            "'accelerate.save', 'Accelerator.save_model']; did you mean 'torch.save'?",
        ),
        (
            lambda m: tv.why_size(m, nam="w.pt"),
            UnknownOptionError,
            "tv.why_size() got an unexpected keyword argument 'nam'; did you mean 'name'? Its options: name",
        ),
        (
            lambda m: tv.diff(m, m, contnt=True),
            UnknownOptionError,
            "tv.diff() got an unexpected keyword argument 'contnt'; did you mean 'content'? Its options: content, progress",
        ),
        (
            lambda m: tv.analyze(m, zzz=1),
            UnknownOptionError,
            "tv.analyze() got an unexpected keyword argument 'zzz'. "
            "Its options: group, variant, optimizer, grad, remote_limits",
        ),
        (
            lambda m: tv.load_check(torch.nn.Linear(4, 4), m, loader="load_state_dic"),
            OptionError,
            f"tv.load_check(): loader must be one of {sorted(LOADERS)}, got "
            "'load_state_dic'; did you mean 'load_state_dict'?",
        ),
        (
            lambda m: tv.show(m, width=800),
            OptionError,
            "tv.show(): width is a figure width in inches, from 0.5 to",
        ),
        (
            lambda m: tv.limits(index_names=-1),
            OptionError,
            "tv.limits(): limits(index_names=...) must be a non-negative int, got -1",
        ),
        (
            lambda m: tv.show(m, max_rows=5),
            OptionError,
            "tv.show(): max_rows=5 applies to a tv.diff result; a layout's diagram limits its rows with max_lanes=5",
        ),
        (
            lambda m: tv.show(tv.diff(m, m), by="span", names="q"),
            OptionError,
            "tv.show(): by=, names= cannot apply to a tv.diff result (two layouts side by side; its one option "
            "is max_rows); leave it out",
        ),
    ],
)
def test_wrong_options_name_the_function_called_and_the_closest_choice(call, error, message):
    with pytest.raises(error) as info:
        call(torch.nn.Linear(4, 4))
    assert str(info.value).startswith(message)
    assert "diagram()" not in str(info.value) or message.startswith("tv.diagram()")


def test_the_explore_options_that_cannot_apply_say_so():
    pytest.importorskip("ipywidgets")
    with pytest.raises(OptionError) as info:
        tv.explore(seed_tensors(), byte_range=(0, 8), snapshot=False)
    assert str(info.value) == (
        "tv.explore(): byte_range=(0, 8) zooms into the bytes of one storage, and no storage= was given; pass "
        "it too (its index, or the name of a tensor on it), e.g. storage=0, byte_range=(0, 8)"
    )
    with pytest.raises(OptionError, match=r"^tv.explore\(\): by must be one of .* got 'exact spam'; did you mean"):
        tv.explore(seed_tensors(), by="exact spam", snapshot=False)
    ex = tv.explore(seed_tensors(), storage=0, byte_range=(0, 8), snapshot=False)
    assert ex.state.byte_range == (0, 8)


def test_the_explorer_labels_are_values():
    from tensorviz.explorer.state import GROUPINGS

    assert {label: by_value(label) for label, _ in GROUPINGS} == {label: by for label, by in GROUPINGS}
    assert (
        by_value("by rank") == "rank" and by_value("mesh dp") == "mesh:dp" and set(LABELS) == {"exact span", "by rank"}
    )
    layout = tv.analyze(seed_tensors())
    for label, by in GROUPINGS:
        expected = tv.diagram(layout, by=by)
        assert tv.diagram(layout, by=label).options == expected.options
        assert tv.show(layout, by=label).text == expected.to_text()
    pytest.importorskip("ipywidgets")
    ex = tv.explore(layout, by="exact span", snapshot=False)
    assert ex.state.by == "span" and ex.by_toggle.label == "exact span"


def test_a_public_function_keeps_its_own_signature_and_name():
    assert tv.show.__name__ == "show" and "by" in inspect.signature(tv.show).parameters
    assert inspect.signature(tv.explore).parameters["by"].kind is inspect.Parameter.KEYWORD_ONLY
    with tv.limits(index_names=7):
        assert tv.limits().index_names == 7


def test_max_lanes_limits_the_canvas_too():
    pytest.importorskip("ipywidgets")
    sd = {f"w{i}": torch.zeros(i + 1, 3) for i in range(12)}
    sd["t"] = sd["w0"].t()
    every = tv.explore(sd, snapshot=False, expand_simple=True, all_storages=True)
    assert len(every.diagram.lanes) == 14 and every._renderer.picture(every.state)[0].lanes == every.diagram.lanes
    capped = tv.explore(sd, max_lanes=5, snapshot=False, expand_simple=True, all_storages=True)
    kinds = [lane.kind for lane in capped.diagram.lanes]  # the canvas's diagram
    assert len(kinds) == 5 and kinds[-1].startswith("more")
    assert len(capped._renderer.picture(capped.state)[0].lanes) == 5  # and the static picture


@pytest.mark.parametrize(
    "options, message",
    [
        ({"storage": 9}, "tv.explore(): storage index 9 is out of range: this layout has 2 storages (0..1)"),
        (
            {"names": "q("},
            "tv.explore(): name filter 'q(' is not a valid regular expression: missing ), unterminated subpattern "
            "at position 1. Fix it (escape brackets as \\( ) or clear the box to show every tensor",
        ),
        (
            {"storage": 0, "byte_range": (0, 10**6)},
            "tv.explore(): byte_range (0, 1000000) must satisfy 0 <= lo < hi <= 16 (the size of storage #0)",
        ),
    ],
)
def test_the_explorers_own_checks_name_tv_explore(options, message):
    pytest.importorskip("ipywidgets")
    with pytest.raises(OptionError) as info:
        tv.explore(torch.nn.Linear(2, 2), snapshot=False, **options)
    assert str(info.value) == message
