"""Names matched between two layouts: exact names first, then a stated rule.

Pure Python + numpy. Names left over on both sides after the exact match are reduced by
removing wrapper prefixes from their start (:data:`WRAPPER_PREFIXES`, repeatedly, in any
order, never the whole name); left-over names whose reduced forms are equal, and unique on each
side, match. The rules used are returned in words, so a diff always says how it matched names.

Vectorised, and exact for any ``str`` (NUL, newlines, lone surrogates, any length): names are
joined by their hashes -- sorted ``hash()`` values, every candidate pair then
compared as strings, and a hash shared by two different names sends the join to a dict -- and
prefixes are found by comparing the names' UTF-8 bytes (surrogates passed through) with the
prefixes' bytes a character at a time over all names at once. Every prefix is ASCII, so a
prefix's bytes and characters coincide and no byte of a longer character can match one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain, repeat
from operator import eq, getitem

import numpy as np

__all__ = ["match_names", "WRAPPER_PREFIXES"]

#: Prefixes that wrappers add to every name: DDP/DataParallel, torch.compile, a task head's
#: base model, a peft model. Removed (repeatedly, in any order) to match names left over.
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "model.", "base_model.model.")

_BYTES = tuple(np.frombuffer(p.encode("ascii"), np.uint8) for p in WRAPPER_PREFIXES)
_ROUNDS = 24  # prefixes removed by numpy, per name; a deeper nest is finished in Python
_DEEP = 5 ** (_ROUNDS + 1)  # codes of removed starts found in Python start here
_hash = hash  # what names are joined by (a test swaps in a colliding one)


def match_names(names_a: Sequence[str], names_b: Sequence[str]) -> tuple[np.ndarray, list, list[str]]:
    """Per name of a, the position of its match in b (-1 when none); the pairs matched by a
    rule; the rules used, in words.

    Exact names first. Then every name left over is reduced by removing wrapper prefixes from
    its start (:data:`WRAPPER_PREFIXES`, repeatedly, while something is left); left-over names
    whose reduced forms are equal and unique on each side match. The names of each side are
    unique, as a Layout's are (repeated names are not diagnosed here).

    >>> pos, renamed, rules = match_names(["module.w", "b"], ["w", "b", "c"])
    >>> pos.tolist(), renamed, rules
    ([0, 1], [('module.w', 'w')], ["1 name matched with prefix 'module.' removed from a"])
    """
    pos = _exact(names_a, names_b)
    left_a = np.flatnonzero(pos < 0)
    if not left_a.size:
        return pos, [], []
    taken = np.zeros(len(names_b), dtype=bool)
    taken[pos[pos >= 0]] = True
    left_b = np.flatnonzero(~taken)
    rest_a, rest_b = _take(names_a, left_a), _take(names_b, left_b)
    (cut_a, code_a), (cut_b, code_b) = _removed(rest_a), _removed(rest_b)
    found = _join(_cores(rest_a, cut_a), _cores(rest_b, cut_b))
    ka = np.flatnonzero(found >= 0)  # left-over a names matched, in a's order
    kb = found[ka]
    pos[left_a[ka]] = left_b[kb]
    renamed = list(zip(_take(rest_a, ka), _take(rest_b, kb)))
    return pos, renamed, _rules(rest_a, cut_a[ka], code_a[ka], rest_b, cut_b[kb], code_b[kb], ka, kb)


def _take(seq: Sequence[str], index: np.ndarray) -> list[str]:
    """``[seq[i] for i in index]`` (all of ``seq`` as a list when ``index`` is every position)."""
    if index.size == len(seq) and (not index.size or (index[0] == 0 and (np.diff(index) == 1).all())):
        return list(seq)
    return list(map(seq.__getitem__, index.tolist()))


# -- joining strings by their hashes -----------------------------------------------------
def _exact(names_a: Sequence[str], names_b: Sequence[str]) -> np.ndarray:
    """Per name of a, the position of the equal name of b, or -1 (names unique on each side):
    names in the same place on both sides first (one pass), the rest joined by hashes."""
    k = min(len(names_a), len(names_b))
    here = np.fromiter(map(eq, names_a, names_b), bool, k)
    pos = np.full(len(names_a), -1, dtype=np.int64)
    pos[:k][here] = np.flatnonzero(here)
    if here.all() and len(names_a) == len(names_b):
        return pos
    rest_a = np.flatnonzero(pos < 0)
    rest_b = np.r_[np.flatnonzero(~here), np.arange(k, len(names_b))]
    found = _join(_take(names_a, rest_a), _take(names_b, rest_b))
    pos[rest_a[found >= 0]] = rest_b[found[found >= 0]]
    return pos


def _join(keys_a: Sequence[str], keys_b: Sequence[str]) -> np.ndarray:
    """Per key of a, the position of the one equal key of b, or -1 -- also -1 when the key
    is not unique on its side or on the other. One sort of both sides' hashes (their high
    bits, then the position, packed in one int64: a sort, not an argsort): equal keys are in
    one run of equal hashes. A run of two, one from each side, is a match when the strings
    are equal; keys in longer runs (duplicates, or a hash shared by different keys) are
    joined by a dict."""
    na, nb = len(keys_a), len(keys_b)
    pos = np.full(na, -1, dtype=np.int64)
    if not na or not nb:
        return pos
    n = na + nb
    bits = n.bit_length()
    key = np.fromiter(map(_hash, chain(keys_a, keys_b)), np.int64, n) >> bits << bits | np.arange(n)
    key.sort()
    at, hs = key & ((1 << bits) - 1), key >> bits
    tie = hs[1:] == hs[:-1]
    if not tie.any():
        return pos
    starts = np.flatnonzero(np.r_[True, ~tie, True])
    size, first = np.diff(starts), starts[:-1]
    two = first[size == 2]
    i, j = at[two], at[two + 1]  # positions ascend within a run
    pair = np.sort((i * n + j)[(i < na) & (j >= na)])
    i, j = pair // n, pair % n - na  # in a's order: both sides read mostly in order
    same = np.fromiter(map(eq, _take(keys_a, i), _take(keys_b, j)), bool, i.size)
    pos[i[same]] = j[same]
    big = size > 2
    if big.any():
        lengths = size[big]
        inside = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        members = np.sort(at[np.repeat(first[big], lengths) + inside])
        ma, mb = members[members < na], members[members >= na] - na
        found = _join_by_dict(_take(keys_a, ma), _take(keys_b, mb))
        pos[ma[found >= 0]] = mb[found[found >= 0]]
    return pos


def _join_by_dict(keys_a: Sequence[str], keys_b: Sequence[str]) -> np.ndarray:
    """:func:`_join` by counting and looking up the strings themselves."""
    count_a, count_b = Counter(keys_a), Counter(keys_b)
    index_b = {k: j for j, k in enumerate(keys_b) if count_b[k] == 1}
    return np.fromiter((index_b.get(k, -1) if count_a[k] == 1 else -1 for k in keys_a), np.int64, len(keys_a))


# -- wrapper prefixes --------------------------------------------------------------------
def _removed(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per name, how many leading characters are wrapper prefixes (never all of them), and a
    code naming that start (equal codes, equal starts): base-5 digits, one per prefix."""
    n = len(names)
    joined = "".join(names)
    if joined.isascii():
        data, lengths = joined.encode("ascii"), np.fromiter(map(len, names), np.int64, n)
    else:
        encoded = [s.encode("utf-8", "surrogatepass") for s in names]
        data, lengths = b"".join(encoded), np.fromiter(map(len, encoded), np.int64, n)
    buf = np.frombuffer(data, np.uint8)
    starts = np.cumsum(lengths) - lengths
    cut, code = np.zeros(n, np.int64), np.zeros(n, np.int64)
    active = np.arange(n)
    for _ in range(_ROUNDS):
        step, digit = _one_prefix(buf, starts[active] + cut[active], lengths[active] - cut[active])
        moved = step > 0
        active = active[moved]
        if not active.size:
            return cut, code
        cut[active] += step[moved]
        code[active] = code[active] * 5 + digit[moved]
    _finish(names, active, cut, code)
    return cut, code


def _one_prefix(buf: np.ndarray, at: np.ndarray, left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per name (its bytes from ``at``, ``left`` of them), the length of the wrapper prefix it
    starts with, leaving something after it (0 if none), and that prefix's digit (1 + index).
    No two prefixes can start at one place, so at most one matches."""
    step, digit = np.zeros(at.size, np.int64), np.zeros(at.size, np.int64)
    for d, p in enumerate(_BYTES):
        cand = np.flatnonzero(left > p.size)
        for k, byte in enumerate(p.tolist()):
            cand = cand[buf[at[cand] + k] == byte]
        step[cand], digit[cand] = p.size, d + 1
    return step, digit


def _finish(names: list[str], active: np.ndarray, cut: np.ndarray, code: np.ndarray) -> None:
    """Names nested deeper than numpy went: the rest of their prefixes, in Python."""
    starts: dict[str, int] = {}
    for i in active.tolist():
        name, k = names[i], int(cut[i])
        while p := next((p for p in WRAPPER_PREFIXES if name.startswith(p, k) and len(name) > k + len(p)), None):
            k += len(p)
        cut[i] = k
        code[i] = _DEEP + starts.setdefault(name[:k], len(starts))


def _cores(names: list[str], cut: np.ndarray) -> list[str]:
    """The names with their wrapper prefixes removed (a name with none is itself)."""
    return list(map(getitem, names, map(slice, cut.tolist(), repeat(None))))


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
