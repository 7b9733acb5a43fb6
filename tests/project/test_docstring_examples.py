"""Every ``>>>`` example in the package's docstrings runs and prints what it says.

Public functions carry a short example (STYLE.md); an example that no longer runs is worse than
none, so each module's examples run here as one test per module.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tensorviz

MODULES = sorted(m.name for m in pkgutil.walk_packages(tensorviz.__path__, "tensorviz."))
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_examples_in_docstrings_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in finder.find(module, name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (printed above)"


def test_the_examples_are_many():
    finder = doctest.DocTestFinder(exclude_empty=True)
    count = sum(len(t.examples) for m in MODULES for t in finder.find(importlib.import_module(m), m))
    assert count >= 300  # 316 when written; a drop means examples were lost, not fixed
