"""The save check's savers are one table of rule objects (tensorviz.savecheck.savers.rules)."""

from __future__ import annotations

import pytest
import torch

import tensorviz as tv
from tensorviz.savecheck.outcomes import SAVERS
from tensorviz.savecheck.savers.rules import SAVER_RULES, LibraryRule

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def test_one_rule_per_saver_in_report_order():
    assert list(SAVER_RULES) == list(SAVERS)
    assert all(isinstance(r, LibraryRule) and r.key == k and r.call == SAVERS[k] for k, r in SAVER_RULES.items())
    assert {r.library for r in SAVER_RULES.values()} == {"safetensors", "torch", "transformers", "peft", "accelerate"}


def test_each_verdict_names_the_call_and_library_of_its_rule():
    w = torch.zeros(4, 4)
    plain = tv.save_check({"w": w, "t": w.t()})
    module = tv.save_check(torch.nn.Linear(2, 2))
    assert [v.saver for v in plain] == [
        "safetensors.save_file",
        "safetensors.save_model",
        "torch.save",
        "accelerate.save",
    ]
    assert plain["safetensors.save_model"].call == (
        "safetensors.torch.save_model(model, path)  # a module whose state_dict() is this mapping"
    )
    assert plain["accelerate.save"].call == (
        "accelerate.utils.save(state_dict, path, safe_serialization=True)  # a plain dict: accelerate does not de-duplicate it"
    )
    assert module["torch.save"].call == "torch.save(model.state_dict(), path)"
    assert "Accelerator.save_model" in [v.saver for v in module] and "Accelerator.save_model" not in [
        v.saver for v in plain
    ]
    for report in (plain, module):
        for v in report:
            assert v.library.split()[0] == SAVER_RULES[v.saver].library
