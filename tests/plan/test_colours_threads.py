"""The layout's colours are computed once, also when threads ask a fresh layout at once
(Layout.derived shares the lock of the layout's own cache)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import tensorviz as tv
from tensorviz.plan.colors import colour_ordinals


def _model() -> dict:
    flat = torch.zeros(13 * 6 * 4)
    out = {
        f"layers.{i}.{r}": flat[24 * i + 4 * k : 24 * i + 4 * k + 4] for i in range(13) for k, r in enumerate("qkvoab")
    }
    out.update({f"solo{i}": torch.zeros(i + 1) for i in range(30)})
    out["tied"] = out["layers.0.q"]
    return out


def _first_questions(layout) -> list:
    """24 threads' first questions to a fresh layout: its colours, a diagram's, its storages."""
    asks = (lambda: colour_ordinals(layout), lambda: tv.diagram(layout).columns.colors, lambda: layout.storages)
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda k: asks[k % 3](), range(24)))


def test_threads_asking_a_fresh_layout_get_one_array():
    model = _model()
    alone = colour_ordinals(tv.analyze(model)).tolist()
    for _ in range(10):
        got = _first_questions(tv.analyze(model))
        arrays = got[0::3]
        assert all(a is arrays[0] for a in arrays)  # made once, cached with the layout
        assert arrays[0].tolist() == alone and not arrays[0].flags.writeable
        assert len(set(map(tuple, got[1::3]))) == 1
    assert np.unique(alone).size == len(alone)  # one ordinal per span group
