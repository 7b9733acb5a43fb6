"""The models the benchmarks (and ``docs/make_tree_gallery.py``) share, each defined once.

``llama_70b_on_meta(dtype)``: a Llama-3-70B-sized ``LlamaForCausalLM`` on ``meta`` (80 layers,
8192 wide, grouped-query attention, 725 tensors; nothing allocated, nothing downloaded). It is
the tests' own (``tests.helpers.models``): a benchmark measures the model the tests check. The
scripts run from ``bench/`` (``python bench/bench_x.py``), so this module puts the repository
root on ``sys.path`` for ``tests.helpers``; a notebook kernel a benchmark drives does the same
with ``sys.path.insert(0, <bench folder>)`` before ``from _models import llama_70b_on_meta``.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.helpers.models import llama_70b_on_meta  # noqa: E402

__all__ = ["ROOT", "llama_70b_on_meta"]
