"""The work budgets of reading untrusted input, stated once, which the input cannot raise.

Every source that reads something it does not control (a checkpoint's pickle, a DCP
``.metadata``, an index, a live ``Mapping`` whose iteration may never end) counts its work
against one of these budgets and stops with a :class:`~tensorviz.core.errors.TooLargeError`
naming the budget and how to raise it. A budget is a number here, never a number that grows
with what a file claims to hold. The person analysing raises one deliberately, for one block of
code and one thread (a context variable, not a process-wide setting):

>>> import tensorviz as tv
>>> with tv.limits(pickle_ops=5_000_000):     # doctest: +SKIP
...     layout = tv.analyze("huge_optimizer.pt")
>>> tv.limits().pickle_ops
500000
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, replace

from tensorviz.core.errors import OptionError, TooLargeError

__all__ = ["Limits", "limits", "current", "exceeded"]


@dataclass(frozen=True)
class Limits:
    """The budgets (each a count of things read; the time each costs is stated beside it).

    Attributes:
        pickle_ops: opcodes of a checkpoint's pickle that build or store an object, beyond the
            40 each tensor reference brings (``pickle_scan.PER_TENSOR_OPS``, up to
            ``tensor_refs`` references): a state dict's ~30 a tensor never spend it, so a valid
            checkpoint is read whatever its tensor count up to ``tensor_refs``, at a cost stated
            per tensor (about twice ``torch.load(weights_only=True)``'s own); 500,000 opcodes
            that build no tensor take ~1-2 s (about 2 us each) on an idle core.
        tensor_refs: tensor references walked in a loaded checkpoint (one view each).
        values: containers and values walked in a loaded checkpoint.
        dcp_entries: entries, chunks and storage records of a DCP ``.metadata`` (each a view).
        index_names: names of an index's ``weight_map`` (parsed, ~200 bytes each).
        live_names: names taken from a live object (a Mapping, module, list), however it iterates
            (a view row costs ~350 bytes and ~2 us: 500,000 is ~175 MB).
        zip_records: records of a torch zip archive.
        header_tensors: tensors of one safetensors header (about 10 us and 900 bytes each to
            read: 200,000 is ~2 s and ~180 MB; the JSON text is counted before it is parsed).
        tree_names: names the module tree of ``print(layout)`` is built for (about 30 us and
            800 bytes each: 50,000 is ~1.5 s); past it the summary says so and leaves the tree
            out (``layout.tree()`` still builds it when asked).
    """

    pickle_ops: int = 500_000
    tensor_refs: int = 200_000
    values: int = 2_000_000
    dcp_entries: int = 500_000
    index_names: int = 500_000
    live_names: int = 500_000
    zip_records: int = 1_000_000
    header_tensors: int = 200_000
    tree_names: int = 50_000


_DEFAULT = Limits()
_CURRENT: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("tensorviz_limits", default=None)


def current() -> Limits:
    """The budgets in force in this context."""
    return _CURRENT.get() or _DEFAULT


class _Raised:
    """What :func:`limits` returns: the budgets now, usable as a context manager to change them."""

    def __init__(self, changes: dict[str, int]) -> None:
        self._changes = changes
        self._token: contextvars.Token | None = None

    def __getattr__(self, name: str) -> int:
        return getattr(current(), name)

    def __enter__(self) -> Limits:
        new = replace(current(), **self._changes)
        self._token = _CURRENT.set(new)
        return new

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None


def limits(
    *,
    pickle_ops: int | None = None,
    tensor_refs: int | None = None,
    values: int | None = None,
    dcp_entries: int | None = None,
    index_names: int | None = None,
    live_names: int | None = None,
    zip_records: int | None = None,
    header_tensors: int | None = None,
    tree_names: int | None = None,
) -> _Raised:
    """The work budgets; as a context manager, raises (or lowers) some for the block inside.

    Args:
        pickle_ops: opcodes a checkpoint's pickle may hold beyond 40 per tensor reference
            (default 500,000).
        tensor_refs: tensor references a checkpoint may hold (default 200,000).
        values: values walked in a checkpoint (default 2,000,000).
        dcp_entries: entries and chunks of a DCP checkpoint (default 500,000).
        index_names: names of a sharded index (default 500,000).
        live_names: names read from a live object (default 500,000).
        zip_records: records of a torch zip archive (default 1,000,000).
        header_tensors: tensors of one safetensors header (default 200,000).
        tree_names: names ``print(layout)`` builds the module tree for (default 50,000).

    >>> import tensorviz as tv
    >>> with tv.limits(index_names=3_000_000):
    ...     tv.limits().index_names
    3000000
    """
    given = dict(
        pickle_ops=pickle_ops,
        tensor_refs=tensor_refs,
        values=values,
        dcp_entries=dcp_entries,
        index_names=index_names,
        live_names=live_names,
        zip_records=zip_records,
        header_tensors=header_tensors,
        tree_names=tree_names,
    )
    changes = {k: v for k, v in given.items() if v is not None}
    for k, v in changes.items():
        if type(v) is not int or v < 0:
            raise OptionError(f"limits({k}=...) must be a non-negative int, got {v!r}")
    return _Raised(changes)


def exceeded(what: str, budget: str, detail: str = "", needed: int | None = None) -> TooLargeError:
    """The error for a budget spent: names the source, the budget and how to raise it.

    ``needed`` is the amount this input asks for where it is known (a count read before any work);
    the suggested budget then covers it, rounded up to two significant digits, instead of 4× today's.
    """
    value = getattr(current(), budget)
    extra = f" ({detail})" if detail else ""
    return TooLargeError(
        f"{what}: more than {value:,} {budget.replace('_', ' ')}{extra}, over tensorviz's work budget "
        f"for untrusted input; if you trust it, raise the budget deliberately: "
        f"with tv.limits({budget}={_suggested(value, needed):_}): tv.analyze(...)"
    )


def _suggested(value: int, needed: int | None) -> int:
    """The budget to suggest: ``needed`` rounded up to two significant digits, else 4× ``value``."""
    if needed is None or needed <= value:
        return value * 4
    unit = 10 ** max(len(str(needed)) - 2, 0)
    return -(-needed // unit) * unit
