"""A safetensors header in which a key may be written twice, read as serde reads it.

safetensors parses its header with Rust's serde_json into ``HashMap``s and structs: a map keeps
the last copy of a repeated key (the header's tensors, ``__metadata__``'s items, anything inside
an ignored extra field) but type-checks every copy; a struct field written twice is an error
("duplicate field": ``__metadata__`` at the top, ``dtype``, ``shape`` or ``data_offsets`` in an
entry). :func:`as_serde_reads` gives exactly that (checked against ``safetensors.safe_open`` by
the differential fuzz in ``tests/hostile/test_hostile_safetensors_diff.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorviz.core.errors import FileFormatError
from tensorviz.sources.parts import parse_json, short

__all__ = ["as_serde_reads"]


class _Pairs(list):
    """One JSON object's (key, value) pairs in file order, repeats kept."""


def as_serde_reads(path: str, text: str, hooks: dict[str, Any], typed: Callable[[str, str, Any], None]) -> dict:
    """The header as safetensors' serde reads it when a key may be written twice.

    serde keeps the last copy of a repeated key in a map (the header's tensors, ``__metadata__``'s
    items, any ignored extra value) but checks every copy's type: each copy of a tensor must be
    a TensorInfo (known dtype, lists of 64-bit counts, two offsets) and each metadata value a
    string. A field of a struct written twice -- ``__metadata__`` at the top, ``dtype``,
    ``shape`` or ``data_offsets`` in an entry -- is an error ("duplicate field"). ``typed``
    type-checks an earlier copy of a tensor (``st_rules``' TensorInfo rules).
    """
    top = parse_json(path, text, "header", object_pairs_hook=_Pairs, **hooks)
    if type(top) is not _Pairs:
        return top
    out: dict[str, Any] = {}
    for name, value in top:
        if name == "__metadata__":
            if name in out:
                raise FileFormatError(
                    f"{path}: the header has two __metadata__ fields; safetensors refuses it (duplicate field)"
                )
            out[name] = _plain_metadata(path, value)
            continue
        if name in out:  # the earlier copy is dropped, but serde read it as a TensorInfo first
            typed(path, name, out.pop(name))
        out[name] = _entry_value(path, name, value)
    return out


def _plain_metadata(path: str, value: Any) -> Any:
    """``__metadata__``'s pairs as serde keeps them: every value a string, the last copy kept."""
    if type(value) is not _Pairs:
        return _plain(value)
    for _, v in value:
        if type(v) is not str:
            raise FileFormatError(
                f"{path}: __metadata__ must map strings to strings, got {short(_plain(v))}; safetensors refuses such a file"
            )
    return dict(value)


def _entry_value(path: str, name: str, value: Any) -> Any:
    """A tensor entry: its three fields each at most once; anything else (ignored) as plain data."""
    if type(value) is not _Pairs:
        return _plain(value)
    fields = [k for k, _ in value if k in ("dtype", "shape", "data_offsets")]
    if len(fields) != len(set(fields)):
        twice = next(k for k in fields if fields.count(k) > 1)
        raise FileFormatError(
            f"{path}: tensor {short(name)}: its entry gives {twice} twice; safetensors refuses it (duplicate field)"
        )
    return {k: _plain(v) for k, v in value}


def _plain(value: Any) -> Any:
    """Parsed JSON with every object a dict (the last copy of a repeated key kept), iteratively."""
    if type(value) not in (_Pairs, list):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, v = stack.pop()
        if type(v) is _Pairs:
            new: Any = dict(v)  # the last copy of a repeated key
            parent[key] = new
            stack.extend((new, k, item) for k, item in new.items())
        elif type(v) is list:
            new = [None] * len(v)
            parent[key] = new
            stack.extend((new, i, item) for i, item in enumerate(v))
        else:
            parent[key] = v
    return root[0]
