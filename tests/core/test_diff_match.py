"""The vectorised name matcher (tensorviz.core.diff_match) against a plain reference.

The reference is the rule in words, one name at a time: exact names first; every name left
over loses wrapper prefixes from its start while something is left after them; left-over names
whose reduced forms are equal and unique on each side match; the rules are counted per pair of
removed starts (those removed from both sides alike cancelled), in the order first used.
Hypothesis draws adversarial names: NUL, newlines, lone surrogates and other non-ASCII
characters, prefixes nested twice or more, names equal to a prefix, names that collide after
stripping.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorviz.core import diff_match
from tensorviz.core.diff_match import WRAPPER_PREFIXES, match_names


def _strip(name: str) -> tuple[str, tuple[str, ...]]:
    removed: list[str] = []
    while True:
        p = next((p for p in WRAPPER_PREFIXES if name.startswith(p) and len(name) > len(p)), None)
        if p is None:
            return name, tuple(removed)
        removed.append(p)
        name = name[len(p) :]


def reference(names_a: list[str], names_b: list[str]) -> tuple[list[int], list, list[str]]:
    index_b = {n: j for j, n in enumerate(names_b)}
    pos = [index_b.get(n, -1) for n in names_a]
    taken = {p for p in pos if p >= 0}
    left_a = [i for i, p in enumerate(pos) if p < 0]
    left_b = [j for j in range(len(names_b)) if j not in taken]
    cores_a = {i: _strip(names_a[i]) for i in left_a}
    cores_b = {j: _strip(names_b[j]) for j in left_b}
    count_a = [c for c, _ in cores_a.values()]
    count_b = [c for c, _ in cores_b.values()]
    unique_b = {c: j for j, (c, _) in cores_b.items() if count_b.count(c) == 1}
    renamed, rules = [], {}
    for i in left_a:
        core, removed_a = cores_a[i]
        j = unique_b.get(core)
        if j is None or count_a.count(core) != 1:
            continue
        pos[i] = j
        renamed.append((names_a[i], names_b[j]))
        sa, sb = removed_a, cores_b[j][1]
        while sa and sb and sa[-1] == sb[-1]:
            sa, sb = sa[:-1], sb[:-1]
        rules[(sa, sb)] = rules.get((sa, sb), 0) + 1
    words = []
    for (sa, sb), n in rules.items():
        parts = [f"{''.join(s)!r} removed from {side}" for s, side in ((sa, "a"), (sb, "b")) if s]
        words.append(f"{n} name{'s' * (n != 1)} matched with prefix {' and '.join(parts)}")
    return pos, renamed, words


_PIECES = [*WRAPPER_PREFIXES, "base_model.", "mod", "model", ".", "w", "x.", "\x00", "\n", "é", "\ud800", "𝔘"]
_NAME = st.lists(st.sampled_from(_PIECES), max_size=5).map("".join)
_SIDE = st.lists(_NAME, max_size=14, unique=True)


def _check(names_a: list[str], names_b: list[str]) -> None:
    pos, renamed, rules = match_names(names_a, names_b)
    assert (pos.tolist(), renamed, rules) == reference(names_a, names_b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SIDE, _SIDE)
def test_matcher_equals_the_reference(names_a: list[str], names_b: list[str]) -> None:
    _check(names_a, names_b)


_COLLIDING = {
    "all alike": lambda s: len(s) % 3,  # every name in a few long runs: all joined by a dict
    "some alike": lambda s: (hash(s) % 5) << 50,  # runs of two of different names, and longer ones
}


@settings(max_examples=150, deadline=None)
@given(_SIDE, _SIDE, st.sampled_from(sorted(_COLLIDING)))
def test_matcher_equals_the_reference_when_hashes_collide(names_a: list[str], names_b: list[str], how: str) -> None:
    """Hashes shared by different names: runs of two are told apart by comparing the strings,
    longer runs are joined by a dict."""
    saved = diff_match._hash
    diff_match._hash = _COLLIDING[how]
    try:
        _check(names_a, names_b)
    finally:
        diff_match._hash = saved


@pytest.mark.parametrize(
    ("names_a", "names_b", "expect_pos", "expect_rules"),
    [
        (["module.", "model.w"], ["w", "module."], [1, 0], ["1 name matched with prefix 'model.' removed from a"]),
        (["module.\nw", "a\x00b"], ["\nw", "module.a\x00b"], [0, 1], None),
        (["module.module.w"], ["w"], [0], ["1 name matched with prefix 'module.module.' removed from a"]),
        (["module.w", "w"], ["model.w"], [-1, -1], []),  # two of a reduce to w: neither matches
        (["_orig_mod.module.x"], ["model.module.x"], [0], None),
    ],
)
def test_matcher_cases(names_a, names_b, expect_pos, expect_rules) -> None:
    pos, _, rules = match_names(names_a, names_b)
    assert pos.tolist() == expect_pos
    if expect_rules is not None:
        assert rules == expect_rules
    _check(names_a, names_b)


def test_deep_nests_past_the_vectorised_rounds() -> None:
    """A name nested deeper than numpy's rounds is finished in Python, with the same rule."""
    deep = "module." * 40 + "w"
    names_a = [deep, "model." * 30 + "v", "_orig_mod." + "module." * 30 + "u"]
    names_b = ["w", "module." + "model." * 29 + "v", "_orig_mod.u"]
    pos, renamed, rules = match_names(names_a, names_b)
    assert pos.tolist() == [0, 1, 2]
    _check(names_a, names_b)


def test_many_names_with_shuffled_wrappers() -> None:
    rng = np.random.default_rng(0)
    base = [f"layers.{i}.w{i % 7}" for i in range(3000)]
    prefixes = ["", *WRAPPER_PREFIXES]
    names_a = [prefixes[k] + n for n, k in zip(base, rng.integers(0, 5, len(base)))]
    names_b = [prefixes[k] + n for n, k in zip(base, rng.integers(0, 5, len(base)))]
    names_b = [names_b[i] for i in rng.permutation(len(names_b))]
    pos, renamed, rules = match_names(names_a, names_b)
    assert (pos >= 0).all()
    _check(names_a, names_b)
