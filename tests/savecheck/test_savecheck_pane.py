"""The explorer's save-check pane is the same check as tv.save_check(model), and an "ok"
beside a dropped name says why the drop is harmless."""

from __future__ import annotations

import gc

import pytest

import tensorviz as tv
from tests.helpers.models import QVOnly, tiny_gpt2

pytest.importorskip("ipywidgets")
pytest.importorskip("transformers")


def test_pane_runs_the_models_own_check_while_the_model_lives():
    model = tiny_gpt2()
    ex = tv.explore(model, snapshot=False)
    ex.save_pane.selected_index = 0  # opening the pane runs the check
    assert ex.save_body.value == tv.save_check(model).to_html()
    assert "6 savers" in ex.save_body.value and "Ties: storage, Python object, declared" in ex.save_body.value
    del model
    gc.collect()
    ex.save_body.value = ""
    ex.save_pane.selected_index = None
    ex.save_pane.selected_index = 0
    assert "checked from a Layout" in ex.save_body.value  # the model is gone: the layout's check


def table_row(html_text: str, saver: str) -> str:
    """The summary table's row of one saver."""
    return next(r for r in html_text.split("<tr")[1:] if f">{saver}<" in r and "kept" in r)


def test_ok_beside_a_dropped_name_says_why():
    row = table_row(tv.save_check(tiny_gpt2()).to_html(), "transformers.save_pretrained")
    assert "✓ ok" in row and "dropped</span>&nbsp;lm_head.weight" in row
    assert "harmless: the same bytes are written under transformer.wte.weight" in row


def test_a_drop_that_loses_bytes_is_not_called_harmless():
    row = table_row(tv.save_check(QVOnly()).to_html(), "accelerate.save")
    assert "dropped</span>&nbsp;v.weight" in row and "harmless" not in row and "lost" in row
