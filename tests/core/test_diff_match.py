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
_BARE = st.lists(st.sampled_from([p for p in _PIECES if p not in WRAPPER_PREFIXES]), max_size=5).map("".join)


def _check(names_a: list[str], names_b: list[str]) -> None:
    pos, renamed, rules = match_names(names_a, names_b)
    assert (pos.tolist(), renamed, rules) == reference(names_a, names_b)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SIDE, _SIDE)
def test_matcher_equals_the_reference(names_a: list[str], names_b: list[str]) -> None:
    _check(names_a, names_b)


@st.composite
def _wrapped(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Two sides of which one is (nearly) the other under one wrapper prefix, in place: the
    matcher's whole-side path, and every way out of it -- a name of the plain side with a
    prefix of its own, an empty name, a name left bare or under another prefix, names swapped,
    one side longer."""
    names = _BARE if draw(st.booleans()) else _NAME  # names with a prefix of their own, or none
    plain = draw(st.lists(names, min_size=1, max_size=10, unique=True))
    p = draw(st.sampled_from(WRAPPER_PREFIXES))
    wrapped = [p + n for n in plain]
    if draw(st.booleans()):  # half of the cases: a way out
        for k in draw(st.lists(st.integers(0, len(plain) - 1), max_size=2)):
            wrapped[k] = draw(st.sampled_from(["", *WRAPPER_PREFIXES])) + plain[k]
        if draw(st.booleans()) and len(wrapped) > 1:
            wrapped[0], wrapped[-1] = wrapped[-1], wrapped[0]
        if draw(st.booleans()):
            wrapped.append(draw(_NAME))
    wrapped = list(dict.fromkeys(wrapped))  # unique, as a side's names are
    return (wrapped, plain) if draw(st.booleans()) else (plain, wrapped)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_wrapped())
def test_matcher_equals_the_reference_for_a_wrapped_side(sides: tuple[list[str], list[str]]) -> None:
    _check(*sides)


def test_a_wrapped_side_matches_in_place_with_one_rule() -> None:
    names = [f"layers.{i}.w" for i in range(1000)]
    pos, renamed, rules = match_names(names, ["module." + n for n in names])
    assert pos.tolist() == list(range(1000)) and renamed[7] == ("layers.7.w", "module.layers.7.w")
    assert rules == ["1000 names matched with prefix 'module.' removed from b"]
    pos, renamed, rules = match_names(["_orig_mod." + n for n in names], names)
    assert rules == ["1000 names matched with prefix '_orig_mod.' removed from a"]
    _check(["", "model.x"], ["module.", "module.model.x"])  # an empty name: the whole side's rule does not apply


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
