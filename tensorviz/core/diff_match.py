"""Names matched between two layouts: exact names first, then a stated rule.

Pure Python + numpy. Names left over on both sides after the exact match are reduced by
removing wrapper prefixes from their start (:data:`WRAPPER_PREFIXES`, repeatedly, in any
order, never the whole name); left-over names whose reduced forms are equal, and unique on each
side, match. The rules used are returned in words, so a diff always says how it matched names.

Exact for any ``str`` (NUL, newlines, lone surrogates, any length), in C-level passes: names
are joined through a dict (``dict(zip(keys, count()))``, looked up by ``map``; a name's hash is
computed once and cached on the string, and a state dict's keys arrive hashed), and prefixes
are found with ``str.startswith`` over all names at once, then ``str.find(".")``: every prefix
ends at its first dot, at a place no other prefix's first dot is, so that place tells which
prefix a name starts with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import count, repeat
from operator import add, eq, itemgetter

import numpy as np

from tensorviz.core.table import objects

__all__ = ["match_names", "match_positions", "WRAPPER_PREFIXES"]

#: Prefixes that wrappers add to every name: DDP/DataParallel, torch.compile, a task head's
#: base model, a peft model. Removed (repeatedly, in any order) to match names left over.
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "model.", "base_model.model.")

# Per place of a name's first ".", the length of the wrapper prefix it starts with (when
# ``str.startswith(WRAPPER_PREFIXES)`` says it starts with one) and that prefix's digit.
_AT_DOT = {p.index("."): (len(p), d + 1) for d, p in enumerate(WRAPPER_PREFIXES)}
_LENGTH = np.zeros(max(_AT_DOT) + 2, np.int64)
_DIGIT = np.zeros(max(_AT_DOT) + 2, np.int64)
for _at, (_n, _d) in _AT_DOT.items():
    _LENGTH[_at], _DIGIT[_at] = _n, _d
assert len(_AT_DOT) == len(WRAPPER_PREFIXES)  # no two prefixes end their first word alike
_ROUNDS = 24  # prefixes removed by numpy, per name; a deeper nest is finished in Python
_DEEP = 5 ** (_ROUNDS + 1)  # codes of removed starts found in Python start here


def match_names(names_a: Sequence[str], names_b: Sequence[str]) -> tuple[np.ndarray, list, list[str]]:
    """Per name of a, the position of its match in b (-1 when none); the pairs matched by a
    rule; the rules used, in words.

    Exact names first. Then every name left over is reduced by removing wrapper prefixes from
    its start (:data:`WRAPPER_PREFIXES`, repeatedly, while something is left); left-over names
    whose reduced forms are equal and unique on each side match. The names of each side are
    unique, as a Layout's are (a repeated name matches nothing by the rule).

    >>> pos, renamed, rules = match_names(["module.w", "b"], ["w", "b", "c"])
    >>> pos.tolist(), renamed, rules
    ([0, 1], [('module.w', 'w')], ["1 name matched with prefix 'module.' removed from a"])
    """
    pos, by_rule, rules = match_positions(names_a, names_b)
    return pos, list(zip(_take(names_a, by_rule), _take(names_b, pos[by_rule]))), rules


def match_positions(names_a: Sequence[str], names_b: Sequence[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """:func:`match_names` without making the pairs: per name of a, the position of its match
    in b (-1 when none); the positions in a of the names matched by a rule (ascending); the
    rules used, in words.

    >>> pos, by_rule, rules = match_positions(["module.w", "b"], ["w", "b", "c"])
    >>> pos.tolist(), by_rule.tolist()
    ([0, 1], [0])
    """
    none = np.zeros(0, np.int64)
    rule = _whole_side(names_a, names_b)  # every name under one prefix on one side: no name on both
    if rule is not None:
        return np.arange(len(names_a)), np.arange(len(names_a)), [rule]
    k = min(len(names_a), len(names_b))
    here = np.fromiter(map(eq, names_a, names_b), bool, k)  # equal names in the same place: one pass
    pos = np.full(len(names_a), -1, dtype=np.int64)
    pos[:k][here] = np.flatnonzero(here)
    if here.all() and len(names_a) == len(names_b):
        return pos, none, []
    left_a, left_b = np.flatnonzero(pos < 0), np.r_[np.flatnonzero(~here), np.arange(k, len(names_b))]
    rest_a, rest_b = _take(names_a, left_a), _take(names_b, left_b)
    rule = _whole_side(rest_a, rest_b)
    if rule is not None:  # every name left over is the other side's, in place, under one prefix
        pos[left_a] = left_b
        return pos, left_a, [rule]
    found = _join(rest_a, rest_b)  # equal names elsewhere
    pos[left_a[found >= 0]] = left_b[found[found >= 0]]
    left_a = np.flatnonzero(pos < 0)
    if not left_a.size:
        return pos, none, []
    taken = np.zeros(len(names_b), dtype=bool)
    taken[pos[pos >= 0]] = True
    left_b = np.flatnonzero(~taken)
    rest_a, rest_b = _take(names_a, left_a), _take(names_b, left_b)
    (core_a, cut_a, code_a), (core_b, cut_b, code_b) = _removed(rest_a), _removed(rest_b)
    found = _join(core_a, core_b)
    ka = np.flatnonzero(found >= 0)  # left-over a names matched, in a's order
    kb = found[ka]
    pos[left_a[ka]] = left_b[kb]
    return pos, left_a[ka], _rules(rest_a, cut_a[ka], code_a[ka], rest_b, cut_b[kb], code_b[kb], ka, kb)


def _whole_side(rest_a: Sequence[str], rest_b: Sequence[str]) -> str | None:
    """The rule, when one side's names left over are the other's, in the same places, each
    under one wrapper prefix ``p`` (a wrapped model's names: the common case), else None.

    Then the rule matches exactly those pairs: no name of the plain side starts with a prefix
    and every name of the other does, so no name is on both sides; each wrapped name loses
    ``p`` (something is left: no plain name is empty) and nothing more, and is the plain name
    in its place; the plain names are unique, so their reduced forms are."""
    if len(rest_a) != len(rest_b) or not rest_a:
        return None
    for plain, wrapped, side in ((rest_a, rest_b, "b"), (rest_b, rest_a, "a")):
        p = next((p for p in WRAPPER_PREFIXES if wrapped[0].startswith(p)), None)
        if p is None or plain[0].startswith(WRAPPER_PREFIXES):
            continue
        # Each pass reads every name (1M names: ~0.1 s of cache misses each), so there are three.
        if all(map(eq, wrapped, map(add, repeat(p), plain))) and "" not in plain:
            if not any(map(str.startswith, plain, repeat(WRAPPER_PREFIXES))):
                return _rule_words(len(plain), (p,) * (side == "a"), (p,) * (side == "b"))
    return None


def _take(seq: Sequence[str], index: np.ndarray) -> list[str]:
    """``[seq[i] for i in index]`` (all of ``seq`` as a list when ``index`` is every position)."""
    if index.size == len(seq) and (not index.size or (index[0] == 0 and (np.diff(index) == 1).all())):
        return list(seq)
    return list(map(seq.__getitem__, index.tolist()))


# -- joining strings ---------------------------------------------------------------------
def _join(keys_a: Sequence[str], keys_b: Sequence[str]) -> np.ndarray:
    """Per key of a, the position of the one equal key of b, or -1 -- also -1 when the key
    is not unique on its side or on the other. One dict of b's keys (a repeated key is taken
    out of it) and one look-up per key of a; a's repeated keys are those that found the same
    position."""
    na, nb = len(keys_a), len(keys_b)
    if not na or not nb:
        return np.full(na, -1, dtype=np.int64)
    index_b = dict(zip(keys_b, count()))
    if len(index_b) < nb:  # repeated keys in b: none of them matches
        for key, n in Counter(keys_b).items():
            if n > 1:
                del index_b[key]
    pos = np.fromiter(map(index_b.get, keys_a, repeat(-1)), np.int64, na)
    hit = pos[pos >= 0]
    if hit.size:
        twice = np.bincount(hit, minlength=nb) > 1
        if twice.any():  # repeated keys in a: none of them matches
            pos[(pos >= 0) & twice[np.maximum(pos, 0)]] = -1
    return pos


# -- wrapper prefixes --------------------------------------------------------------------
def _removed(names: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per name: the name with its wrapper prefixes removed (never all of it; a name with none
    is itself), how many leading characters were removed, and a code naming that start (equal
    codes, equal starts): base-5 digits, one per prefix."""
    n = len(names)
    cut, code = np.zeros(n, np.int64), np.zeros(n, np.int64)
    active = _prefixed(names)
    if not active.size:
        return names, cut, code
    cores = objects(names)
    for _ in range(_ROUNDS):
        now = cores[active].tolist()
        at = np.fromiter(map(str.find, now, repeat(".")), np.int64, len(now))
        at = np.minimum(at, _LENGTH.size - 1)  # no first dot (-1) or far: no prefix's
        size = _LENGTH[at]
        go = np.flatnonzero(np.fromiter(map(len, now), np.int64, len(now)) > size)  # something left after
        if not go.size:
            break
        step, which = size[go], active[go]
        cut[which] += step
        code[which] = code[which] * 5 + _DIGIT[at[go]]
        shorter = np.empty(go.size, dtype=object)
        for length in np.unique(step).tolist():  # a few prefix lengths: one C-level slice pass each
            k = np.flatnonzero(step == length)
            shorter[k] = objects(list(map(itemgetter(slice(length, None)), cores[which[k]].tolist())))
        cores[which] = shorter
        active = which[_prefixed(shorter.tolist())]
        if not active.size:
            return cores.tolist(), cut, code
    else:
        _finish(names, active, cut, code)
        cores[active] = objects([names[i][c:] for i, c in zip(active.tolist(), cut[active].tolist())])
    return cores.tolist(), cut, code


def _prefixed(names: list[str]) -> np.ndarray:
    """Positions of the names that start with a wrapper prefix (maybe all of the name)."""
    return np.flatnonzero(np.fromiter(map(str.startswith, names, repeat(WRAPPER_PREFIXES)), bool, len(names)))


def _finish(names: list[str], active: np.ndarray, cut: np.ndarray, code: np.ndarray) -> None:
    """Names nested deeper than numpy went: the rest of their prefixes, in Python."""
    starts: dict[str, int] = {}
    for i in active.tolist():
        name, k = names[i], int(cut[i])
        while p := next((p for p in WRAPPER_PREFIXES if name.startswith(p, k) and len(name) > k + len(p)), None):
            k += len(p)
        cut[i] = k
        code[i] = _DEEP + starts.setdefault(name[:k], len(starts))


# -- the rules, in words -----------------------------------------------------------------
def _rules(
    rest_a: list[str],
    cut_a: np.ndarray,
    code_a: np.ndarray,
    rest_b: list[str],
    cut_b: np.ndarray,
    code_b: np.ndarray,
    ka: np.ndarray,
    kb: np.ndarray,
) -> list[str]:
    """The rules of the matched pairs (the starts removed from each side, those removed from
    both alike cancelled), in the order each is first used, with how many pairs used it."""
    if not ka.size:
        return []
    ua, inv_a = np.unique(code_a, return_inverse=True)
    ub, inv_b = np.unique(code_b, return_inverse=True)
    pairs, first, counts = np.unique(inv_a * ub.size + inv_b, return_index=True, return_counts=True)
    merged: dict[tuple, int] = {}
    for f, n in sorted(zip(first.tolist(), counts.tolist())):
        sa, sb = rest_a[int(ka[f])][: int(cut_a[f])], rest_b[int(kb[f])][: int(cut_b[f])]
        rule = _cancelled(_split(sa), _split(sb))
        merged[rule] = merged.get(rule, 0) + n
    return [_rule_words(n, sa, sb) for (sa, sb), n in merged.items()]


def _split(removed: str) -> tuple[str, ...]:
    """The wrapper prefixes a removed start is made of, in order."""
    out: list[str] = []
    while removed:
        p = next(p for p in WRAPPER_PREFIXES if removed.startswith(p))
        out.append(p)
        removed = removed[len(p) :]
    return tuple(out)


def _cancelled(strip_a: tuple[str, ...], strip_b: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The prefixes removed, less those removed from both sides alike (the innermost)."""
    while strip_a and strip_b and strip_a[-1] == strip_b[-1]:
        strip_a, strip_b = strip_a[:-1], strip_b[:-1]
    return strip_a, strip_b


def _rule_words(n: int, strip_a: tuple[str, ...], strip_b: tuple[str, ...]) -> str:
    """Words for a rule (the prefixes removed from each side)."""
    parts = [f"{''.join(s)!r} removed from {side}" for s, side in ((strip_a, "a"), (strip_b, "b")) if s]
    return f"{n} name{'s' * (n != 1)} matched with prefix {' and '.join(parts)}"
