"""Every fix the load check suggests is code a user can paste: tests/helpers/loadfix_runner.py pastes each
one in a subprocess, on freshly built objects, and checks the load it ends with (see there)."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch

import tensorviz as tv
from tensorviz.core.names import elide
from tests.helpers import env, script
from tests.helpers.models import TiedLM
from tests.loadcheck.test_loadcheck import SCENARIOS as SD
from tests.loadcheck.test_loadcheck import _prefixed, _sd, _seeded
from tests.loadcheck.test_loadcheck_pretrained import SCENARIOS as FP

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

#: the scenarios whose report suggests a fix (each run below).
WITH_FIXES = {
    "sd:tied model <- untied checkpoint",
    "sd:module. prefix",
    "sd:_orig_mod. prefix, strict=False",
    "sd:assign=True breaks a tie",
    "sd:assign=True, strict=False, one key",
    "sd:safetensors file into a tied model",
    "fp:tied files, config flipped to untied",
    "fp:untied files, config flipped to tied",
    "fp:fp32 files into dtype=bfloat16",
    "fp:fp32 files into dtype='float16'",
    "fp:resized vocabulary raises",
    "fp:module. prefix in the files",
    "fp:head model from a base checkpoint",  # tie the new head to the embeddings, or keep it random
}


@pytest.mark.slow
def test_every_suggested_fix_runs_and_makes_the_load_clean() -> None:
    cases = [f"sd:{n}" for n in SD] + [f"fp:{n}" for n in FP]
    proc = subprocess.run(
        [*script("loadfix_runner"), *cases],
        capture_output=True,
        text=True,
        timeout=900,
        env=env(),
    )
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and len(results) == len(cases), proc.stderr[-3000:]
    assert [r for r in results if r["failure"]] == []
    assert {r["case"] for r in results if r["fixes"]} == WITH_FIXES


def test_the_code_of_each_kind_of_fix() -> None:
    r = tv.load_check(_seeded(TiedLM), _prefixed("module.")())
    assert [f.code for f in r.fixes] == [
        "state_dict = {k.removeprefix('module.'): v for k, v in state_dict.items()}\nmodel.load_state_dict(state_dict)"
    ]
    r = tv.load_check(_seeded(TiedLM), _sd(TiedLM()))
    assert [f.code for f in r.fixes] == [
        "state_dict['lm_head.weight'] = state_dict['wte.weight']\nmodel.load_state_dict(state_dict)"
    ]
    r = tv.load_check(_seeded(TiedLM), _sd(TiedLM()), assign=True)
    assert [f.code for f in r.fixes] == [
        "model.load_state_dict(state_dict, assign=True)\n"
        "setattr(model.get_submodule('lm_head'), 'weight', model.get_parameter('wte.weight'))"
    ]
    text = str(r).splitlines()
    assert text[-5:-3] == ["fixes (1), code to paste:", elide("# " + r.fixes[0].title, 78).join(["  ", ""])]
    assert text[-3:-1] == ["    " + line for line in r.fixes[0].code.splitlines()]  # code whole, never elided
    assert "<pre>model.load_state_dict(state_dict, assign=True)\nsetattr(model.get_submodule(&#x27;lm_head&#x27;)" in (
        r._repr_html_()
    )
    assert r.to_json()["fixes"][0]["code"] == r.fixes[0].code


def test_the_code_of_from_pretrained_fixes(tmp_path) -> None:
    import transformers

    folder = FP["fp32 files into dtype=bfloat16"][1](str(tmp_path))
    r = tv.load_check(
        transformers.GPT2LMHeadModel, folder, loader="from_pretrained", loader_kwargs={"dtype": torch.bfloat16}
    )
    assert [(f.code, f.keywords) for f in r.fixes] == [
        ("model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32)", (("dtype", torch.float32),))
    ]
