"""Names matched between two layouts: exact names first, then a stated rule.

Pure Python + numpy. Names left over on both sides after the exact match are reduced by
removing wrapper prefixes from their start (:data:`WRAPPER_PREFIXES`, repeatedly, in any
order); left-over names whose reduced forms are equal, and unique on each side, match. The
rules used are returned in words, so a diff always says how it matched names.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import repeat

import numpy as np

__all__ = ["match_names", "WRAPPER_PREFIXES"]

#: Prefixes that wrappers add to every name: DDP/DataParallel, torch.compile, a task head's
#: base model, a peft model. Removed (repeatedly, in any order) to match names left over.
WRAPPER_PREFIXES = ("module.", "_orig_mod.", "model.", "base_model.model.")


def match_names(names_a: Sequence[str], names_b: Sequence[str]) -> tuple[np.ndarray, list, list[str]]:
    """Per name of a, the position of its match in b (-1 when none); the pairs matched by a
    rule; the rules used, in words.

    Exact names first. Then every name left over is reduced by removing wrapper prefixes from
    its start (:data:`WRAPPER_PREFIXES`, repeatedly); left-over names whose reduced forms are
    equal and unique on each side match.

    >>> pos, renamed, rules = match_names(["module.w", "b"], ["w", "b", "c"])
    >>> pos.tolist(), renamed, rules
    ([0, 1], [('module.w', 'w')], ["1 name matched with prefix 'module.' removed from a"])
    """
    index_b = dict(zip(names_b, range(len(names_b))))
    pos = np.fromiter(map(index_b.get, names_a, repeat(-1)), np.int64, len(names_a))
    left_a = np.flatnonzero(pos < 0).tolist()
    if not left_a:
        return pos, [], []
    taken = np.zeros(len(names_b), dtype=bool)
    taken[pos[pos >= 0]] = True
    left_b = np.flatnonzero(~taken).tolist()
    reduced_a, reduced_b = _reduced(names_a, left_a), _reduced(names_b, left_b)
    get_b = reduced_b.get
    pairs = [(i, j, c) for c, i in reduced_a.items() if i >= 0 and (j := get_b(c, -1)) >= 0]
    if pairs:
        pos[np.fromiter((p[0] for p in pairs), np.int64, len(pairs))] = np.fromiter(
            (p[1] for p in pairs), np.int64, len(pairs)
        )
    renamed = [(names_a[i], names_b[j]) for i, j, _ in pairs]
    counts = Counter((a[: len(a) - len(c)], b[: len(b) - len(c)]) for (a, b), (_, _, c) in zip(renamed, pairs))
    merged: dict[tuple, int] = {}
    for (sa, sb), n in counts.items():
        rule = _cancelled(_split(sa), _split(sb))
        merged[rule] = merged.get(rule, 0) + n
    return pos, renamed, [_rule_words(n, sa, sb) for (sa, sb), n in merged.items()]


#: Wrapper prefixes at the start of a name, repeated; never the whole name.
_PREFIXES = re.compile(
    "^(?:(?:" + "|".join(re.escape(p) for p in sorted(WRAPPER_PREFIXES, key=len, reverse=True)) + ")(?=.))+"
)


def _reduced(names: Sequence[str], positions: list[int]) -> dict[str, int]:
    """Reduced name -> position; -1 when two names reduce alike (then neither matches)."""
    sub, starts = _PREFIXES.sub, tuple(WRAPPER_PREFIXES)
    cores = [sub("", n, count=1) if n.startswith(starts) else n for n in map(names.__getitem__, positions)]
    out = dict(zip(cores, positions))
    if len(out) != len(cores):
        seen: set[str] = set()
        for core in cores:
            if core in seen:
                out[core] = -1
            seen.add(core)
    return out


def _split(removed: str) -> tuple[str, ...]:
    """The wrapper prefixes a removed start is made of, in order."""
    out: list[str] = []
    while removed:
        p = next(p for p in sorted(WRAPPER_PREFIXES, key=len, reverse=True) if removed.startswith(p))
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
