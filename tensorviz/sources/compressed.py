"""compressed-tensors' ``pack-quantized`` checkpoints (llm-compressor, vLLM): per linear layer
``weight_packed`` + ``weight_scale`` + ``weight_shape`` [+ ``weight_zero_point``], with the
``quantization_config`` (``quant_method: compressed-tensors``) in ``config.json``.

As compressed-tensors 0.20 writes it (``compressors/pack_quantized/base.py``): the weight
``[out, in]`` quantized to ``num_bits`` is packed along each row into int32 words,
``weight_packed`` int32 ``[out, ceil(in·bits/32)]`` (32 consecutive values fill exactly
``bits`` words); ``weight_scale`` ``[out, ceil(in/group)]`` (``[out, 1]`` per channel) in the
model's dtype; ``weight_shape`` int64 ``[2]`` holds ``out, in`` (read here: 16 bytes);
``weight_zero_point``, for asymmetric group/channel schemes, packed along outputs:
int32 ``[ceil(out·bits/32), groups]``. Header-only: no torch.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from typing import Any

from tensorviz.core.records import Piece, TensorView

__all__ = ["compressed_weight", "SUFFIX", "scheme_of"]

SUFFIX = ".weight_packed"
_PARTS = ("weight_packed", "weight_scale", "weight_zero_point", "weight_shape")
_KIND = "compressed-tensors"


def scheme_of(config: Mapping[str, Any]) -> tuple[int, int, str]:
    """``(bits, group size or 0, strategy)`` of the config's first weight scheme (4, 0, "" if none)."""
    groups = config.get("config_groups")
    for scheme in groups.values() if isinstance(groups, Mapping) else ():
        w = scheme.get("weights") if isinstance(scheme, Mapping) else None
        if isinstance(w, Mapping):
            bits, group = w.get("num_bits"), w.get("group_size")
            bits = bits if isinstance(bits, int) and 0 < bits <= 8 else 4
            return bits, group if isinstance(group, int) and group > 0 else 0, str(w.get("strategy") or "")
    return 4, 0, ""


def compressed_weight(
    name: str, views: Mapping[str, TensorView], config: Mapping[str, Any], dtype: str
) -> tuple[dict[str, Piece], list[str]]:
    """Pieces and problems of one pack-quantized weight (``name`` ends with ``.weight_packed``)."""
    prefix = name[: -len(SUFFIX)]
    packed = views[name]
    bits, group, strategy = scheme_of(config)
    scale = views.get(f"{prefix}.weight_scale")
    shape = _weight_shape(views.get(f"{prefix}.weight_shape"))
    if len(packed.shape) != 2:
        return {}, [f"{name} is {packed.dtype}{list(packed.shape)}: not a 2-D pack-quantized weight; left as stored"]
    if isinstance(shape, str):  # the logical shape from the stored ones (in: a bound without a group)
        if scale is None or len(scale.shape) != 2:
            return {}, [f"{name}: {shape}, and no 2-D weight_scale; left as stored"]
        shape = (packed.shape[0], scale.shape[1] * group if group else packed.shape[1] * 32 // bits)
    logical = (scale.dtype if scale is not None else "") or dtype
    piece = Piece(f"{prefix}.weight", "weight_packed", _KIND, logical, shape, bits, (group,) if group else ())
    pieces = {f"{prefix}.{p}": _part(piece, p) for p in _PARTS if f"{prefix}.{p}" in views}
    return pieces, _problems(prefix, views, shape, bits, group, strategy)


def _part(piece: Piece, part: str) -> Piece:
    return Piece(piece.of, part, piece.kind, piece.dtype, piece.shape, piece.bits, piece.group)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _problems(
    prefix: str, views: Mapping[str, TensorView], shape: tuple[int, ...], bits: int, group: int, strategy: str
) -> list[str]:
    """Stored shapes that do not match the logical shape, bits and group the config states."""
    out, n_in = shape if len(shape) == 2 else (0, 0)
    groups = _ceil(n_in, group) if group else 1
    expect = {
        "weight_packed": (out, _ceil(n_in * bits, 32)),
        "weight_scale": (out, groups) if strategy in ("group", "channel", "") else None,
        "weight_zero_point": (_ceil(out * bits, 32), groups),
    }
    said = []
    for part, need in expect.items():
        v = views.get(f"{prefix}.{part}")
        if v is None or need is None or tuple(v.shape) == need:
            continue
        said.append(
            f"{prefix}.{part} is {v.dtype}[{'×'.join(map(str, v.shape))}] but a {out} × {n_in} weight in int{bits}"
            f"{f', group {group}' if group else ''} needs [{'×'.join(map(str, need))}]; a loader trusting the "
            f"config reads past it or mis-scales"
        )
    if f"{prefix}.weight_scale" not in views:
        said.append(f"{prefix}.weight_scale is missing: compressed-tensors needs it beside {prefix}.weight_packed")
    return said


def _weight_shape(v: TensorView | None) -> tuple[int, ...] | str:
    """The ``out, in`` a ``weight_shape`` tensor holds, read from its file (at most 64 bytes)."""
    if v is None:
        return "no weight_shape beside it"
    path = v.storage[1] if v.device == "file" and isinstance(v.storage[1], str) else ""
    size = {"int64": 8, "int32": 4}.get(v.dtype)
    if not os.path.isfile(path) or size is None or len(v.shape) != 1 or not 0 < v.nbytes <= 64:
        return f"its weight_shape ({v.dtype}{list(v.shape)}) is not a small integer tensor of a readable file"
    try:
        with open(path, "rb") as f:
            f.seek(v.start)
            raw = f.read(v.nbytes)
    except OSError as err:
        return f"its weight_shape could not be read ({type(err).__name__})"
    values = struct.unpack(f"<{len(raw) // size}{'q' if size == 8 else 'i'}", raw)
    return tuple(values) if all(x >= 0 for x in values) else f"its weight_shape holds {list(values)}"
