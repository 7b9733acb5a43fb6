"""Packed quantized weights in files: GPTQ and AWQ (``qweight`` + ``qzeros`` + ``scales`` [+
``g_idx``]) and FP8 with block scales (``weight`` + ``weight_scale_inv``), recognised from the
model folder's ``config.json`` ``quantization_config`` (as transformers writes it), else from the
tensor names and shapes. Each packed tensor's view gets a :class:`~tensorviz.core.records.Piece`
naming the logical weight, its bits, group and logical shape; packed shapes that do not match the
stated bits and group size are reported as problems (a loader trusting them reads out of bounds).

Header-only: no torch. The layouts, per linear layer of ``in`` inputs and ``out`` outputs:

- GPTQ (AutoGPTQ, gptqmodel): ``qweight`` int32 ``[in·bits/32, out]``, ``qzeros`` int32
  ``[groups, out·bits/32]``, ``scales`` ``[groups, out]``, ``g_idx`` int32 ``[in]``;
  ``groups = ceil(in / group_size)`` (``group_size`` -1: one group).
- AWQ (AutoAWQ GEMM): ``qweight`` int32 ``[in, out·bits/32]``, ``qzeros`` int32
  ``[groups, out·bits/32]``, ``scales`` ``[groups, out]``.
- bitsandbytes 4-bit: ``weight`` uint8 (two values a byte), ``weight.absmax``,
  ``weight.quant_map``, ``weight.nested_absmax``, ``weight.nested_quant_map`` and
  ``weight.quant_state.bitsandbytes__nf4`` (or ``__fp4``): a uint8 tensor holding JSON with the
  logical dtype and shape, read (at most 64 KiB) for the logical weight.
- compressed-tensors ``pack-quantized``: ``weight_packed`` + ``weight_scale`` + ``weight_shape``
  [+ ``weight_zero_point``], see :mod:`tensorviz.sources.compressed`.
- FP8 (DeepSeek-V3): ``weight`` float8 ``[out, in]``, ``weight_scale_inv`` float32
  ``[ceil(out/b0), ceil(in/b1)]`` for ``weight_block_size`` ``[b0, b1]``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from tensorviz.core.facts import QuantizationFacts
from tensorviz.core.layout import Layout
from tensorviz.core.pieces import ITEMSIZE
from tensorviz.core.records import Piece, StorageInfo, TensorView
from tensorviz.sources.compressed import SUFFIX, compressed_weight

__all__ = [
    "annotate_packed",
    "annotate_with",
    "has_packed",
    "quant_config_from",
    "read_quant_config",
    "MAX_CONFIG_BYTES",
]

MAX_CONFIG_BYTES = 10_000_000
_PARTS = {"gptq": ("qweight", "qzeros", "scales", "g_idx"), "awq": ("qweight", "qzeros", "scales")}
_KIND = {"gptq": "GPTQ", "awq": "AWQ", "fp8": "FP8"}
_BNB_STATE = ".quant_state.bitsandbytes__"
_BNB_PARTS = ("absmax", "quant_map", "nested_absmax", "nested_quant_map")
#: Largest packed quant state read (bitsandbytes' JSON of quant type, block size, dtype, shape).
MAX_BNB_STATE = 65536


def read_quant_config(folder: str) -> tuple[dict[str, Any], str]:
    """``(quantization_config with the model's dtype as "dtype", problem)`` from
    ``folder/config.json``; ``({}, "")`` when there is none."""
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        return {}, ""
    try:
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            return {}, f"config.json is over {MAX_CONFIG_BYTES:,} B; its quantization_config was not read"
        with open(path, "rb") as f:
            return quant_config_from(f.read())
    except OSError as err:
        return {}, f"config.json could not be read ({type(err).__name__}: {err}); packed weights recognised by name"


def quant_config_from(raw: bytes) -> tuple[dict[str, Any], str]:
    """``(quantization_config with the model's dtype as "dtype", problem)`` from the bytes of a
    ``config.json`` (a local file's or a remote one's)."""
    try:
        config = json.loads(raw.decode("utf-8"))
    except ValueError as err:
        return {}, f"config.json could not be read ({type(err).__name__}: {err}); packed weights recognised by name"
    qc = config.get("quantization_config") if isinstance(config, dict) else None
    if not isinstance(qc, dict):
        return {}, ""
    dtype = config.get("torch_dtype") or config.get("dtype")
    return {**qc, "dtype": dtype if isinstance(dtype, str) else ""}, ""


def has_packed(names: Iterable[str]) -> bool:
    """Whether any of ``names`` is a packed weight's part (GPTQ/AWQ, FP8 block scales, bitsandbytes,
    compressed-tensors)."""
    return any(n.endswith((".qweight", ".weight_scale_inv", SUFFIX)) or _BNB_STATE in n for n in names)


def annotate_packed(layout: Layout, folder: str) -> Layout:
    """``layout`` with a Piece on every view of a packed weight (and the quantization facts and
    problems in its metadata); ``layout`` itself when it holds no packed weight."""
    if not has_packed(layout.names):
        return layout
    return annotate_with(layout, *read_quant_config(folder))


def annotate_with(layout: Layout, config: Mapping[str, Any], problem: str) -> Layout:
    """:func:`annotate_packed` with the folder's ``quantization_config`` already read (a remote
    folder reads its ``config.json`` by ranges)."""
    names = layout.names
    views = {v.name: v for v in layout.views}
    method = str(config.get("quant_method", "")).lower()
    if method not in ("gptq", "awq", "fp8", "compressed-tensors"):
        method = ""
    pieces: dict[str, Piece] = {}
    problems = [problem] if problem else []
    for name in names:
        if name.endswith(".qweight"):
            found, said = _int_packed(name[: -len(".qweight")], views, config, method)
        elif name.endswith(".weight_scale_inv"):
            found, said = _fp8(name[: -len(".weight_scale_inv")], views, config)
        elif _BNB_STATE in name:
            found, said = _bnb(name, views)
        elif name.endswith(SUFFIX):
            found, said = compressed_weight(name, views, config, _logical_dtype(config, "bfloat16"))
        else:
            continue
        pieces.update(found)
        problems.extend(said)
    return _rebuilt(layout, pieces, problems, _facts(config, method, pieces))


def _facts(config: Mapping[str, Any], method: str, pieces: Mapping[str, Piece]) -> QuantizationFacts:
    kinds = tuple(sorted({p.kind for p in pieces.values()}))
    source = "config.json quantization_config" if method else "tensor names and shapes"
    packing = {key: config[key] for key in QuantizationFacts.CONFIG_KEYS if key in config}
    return QuantizationFacts(kinds, len({p.of for p in pieces.values()}), source, **packing)


def _rebuilt(layout: Layout, pieces: Mapping[str, Piece], problems: list[str], facts: QuantizationFacts) -> Layout:
    views = [dataclasses.replace(v, piece=pieces[v.name]) if v.name in pieces else v for v in layout.views]
    infos = [StorageInfo(s.key, s.device, s.nbytes, s.label) for s in layout.storages]
    meta = dict(layout.metadata)
    meta["quantization"] = facts
    if problems:
        meta["problems"] = [*meta.get("problems", ()), *problems]
    return Layout(views, infos, layout.skipped, source=layout.source, metadata=meta)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _shape(v: TensorView) -> str:
    return f"{v.dtype}[{'×'.join(map(str, v.shape))}]"


def _int_packed(
    prefix: str, views: Mapping[str, TensorView], config: Mapping[str, Any], method: str
) -> tuple[dict[str, Piece], list[str]]:
    """Pieces and problems of one GPTQ or AWQ layer (``prefix.qweight`` and its siblings)."""
    q = views[f"{prefix}.qweight"]
    scales = views.get(f"{prefix}.scales")
    bits = config.get("bits", config.get("w_bit", 4))
    bits = bits if isinstance(bits, int) and 0 < bits <= 32 else 4
    method = method or _guess(prefix, q, scales, views, bits)
    if method not in _PARTS or len(q.shape) != 2:
        return {}, [f"{prefix}.qweight {_shape(q)}: not a 2-D packed GPTQ/AWQ weight; left as stored"]
    rows, cols = q.shape
    if method == "gptq":
        n_in, n_out = rows * 32 // bits, cols
    else:
        n_in, n_out = rows, cols * 32 // bits
    group = config.get("group_size", config.get("q_group_size", 128))
    group = n_in if not isinstance(group, int) or group <= 0 else group
    groups, words = _ceil(n_in, group), _ceil(n_out * bits, 32)
    expect = {"qweight": q.shape, "qzeros": (groups, words), "scales": (groups, n_out), "g_idx": (n_in,)}
    dtype = _logical_dtype(config, scales.dtype if scales else "float16")
    kind = f"{_KIND[method]}"
    pieces, problems = {}, []
    if q.dtype != "int32" or (method == "gptq" and rows * 32 % bits):
        problems.append(
            f"{prefix}.qweight is {_shape(q)}; {kind} int{bits} packs {32 // bits} values per int32 row word"
        )
    for part in _PARTS[method]:
        v = views.get(f"{prefix}.{part}")
        if v is None:
            if part != "g_idx":
                problems.append(f"{prefix}.{part} is missing: {kind} needs it beside {prefix}.qweight")
            continue
        pieces[v.name] = Piece(f"{prefix}.weight", part, kind, dtype, (n_out, n_in), bits, (group,))
        if tuple(v.shape) != tuple(expect[part]):
            problems.append(
                f"{prefix}.{part} is {_shape(v)} but {kind} int{bits} with group {group} and qweight {_shape(q)} "
                f"({n_out} × {n_in}) needs [{'×'.join(map(str, expect[part]))}]; a loader trusting the "
                f"config reads past it or mis-scales"
            )
    return pieces, problems


def _guess(prefix: str, q: TensorView, scales: TensorView | None, views: Mapping[str, TensorView], bits: int) -> str:
    """GPTQ or AWQ from names and shapes alone: GPTQ has ``g_idx`` and packs along inputs
    (``scales`` as wide as ``qweight``); AWQ packs along outputs."""
    if f"{prefix}.g_idx" in views:
        return "gptq"
    if scales is not None and len(q.shape) == 2 and len(scales.shape) == 2:
        return "awq" if scales.shape[1] == q.shape[1] * 32 // bits != q.shape[1] else "gptq"
    return "gptq"


def _logical_dtype(config: Mapping[str, Any], default: str) -> str:
    dtype = str(config.get("dtype") or "")
    return dtype if dtype in ITEMSIZE else default


def _fp8(prefix: str, views: Mapping[str, TensorView], config: Mapping[str, Any]) -> tuple[dict[str, Piece], list[str]]:
    """Pieces and problems of one FP8 block-scaled weight (``prefix.weight`` + ``weight_scale_inv``)."""
    s = views[f"{prefix}.weight_scale_inv"]
    w = views.get(f"{prefix}.weight")
    if w is None:
        return {}, [f"{prefix}.weight is missing beside {prefix}.weight_scale_inv"]
    block = config.get("weight_block_size") or [128, 128]
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        return {}, [f"weight_block_size {block!r} in config.json is not two positive integers"]
    dtype = _logical_dtype(config, "bfloat16")
    piece = Piece(w.name, "weight", "FP8", dtype, tuple(w.shape), 0, tuple(block))
    pieces = {w.name: piece, s.name: dataclasses.replace(piece, part="weight_scale_inv")}
    problems = []
    if len(w.shape) != 2 or not w.dtype.startswith("float8"):
        problems.append(f"{prefix}.weight is {_shape(w)}; FP8 block scaling needs a 2-D float8 weight")
    else:
        need = (_ceil(w.shape[0], block[0]), _ceil(w.shape[1], block[1]))
        if tuple(s.shape) != need:
            problems.append(
                f"{prefix}.weight_scale_inv is {_shape(s)} but weight {_shape(w)} in {block[0]}×{block[1]} "
                f"blocks needs [{need[0]}×{need[1]}]; a loader trusting weight_block_size reads past it"
            )
    return pieces, problems


def _bnb(name: str, views: Mapping[str, TensorView]) -> tuple[dict[str, Piece], list[str]]:
    """Pieces and problems of one bitsandbytes 4-bit weight, from its packed quant state."""
    of, _, qtype = name.partition(_BNB_STATE)
    state = _read_state(views[name])
    if isinstance(state, str):
        return {}, [f"{name}: {state}; the pieces of {of} are left as stored"]
    shape, dtype, block = state.get("shape"), state.get("dtype"), state.get("blocksize")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape) and isinstance(block, int)):
        return {}, [f"{name}: its JSON has no usable shape and blocksize ({_brief(state)})"]
    dtype = dtype if isinstance(dtype, str) and dtype in ITEMSIZE else "float16"
    piece = Piece(of, "packed", f"bitsandbytes {qtype}", dtype, tuple(shape), 4, (block,))
    pieces = {name: dataclasses.replace(piece, part=f"quant_state.bitsandbytes__{qtype}")}
    problems = []
    w = views.get(of)
    if w is not None:
        pieces[of] = piece
        numel = piece.numel
        if w.nbytes != _ceil(numel, 2):
            problems.append(
                f"{of} is {_shape(w)} ({w.nbytes:,} B) but 4-bit {'×'.join(map(str, shape))} needs {_ceil(numel, 2):,} B"
            )
    for part in _BNB_PARTS:
        if f"{of}.{part}" in views:
            pieces[f"{of}.{part}"] = dataclasses.replace(piece, part=part)
    return pieces, problems


def _read_state(v: TensorView) -> dict[str, Any] | str:
    """The JSON a bitsandbytes packed quant state holds, read from its file; or why not."""
    path = v.storage[1] if v.device == "file" and isinstance(v.storage[1], str) else ""
    if not os.path.isfile(path) or v.dtype != "uint8":
        return "not a uint8 tensor of a file tensorviz can read"
    if v.stop - v.start > MAX_BNB_STATE:
        return f"over {MAX_BNB_STATE:,} B"
    try:
        with open(path, "rb") as f:
            f.seek(v.start)
            state = json.loads(f.read(v.stop - v.start).decode("utf-8"))
    except (OSError, ValueError) as err:
        return f"its JSON could not be read ({type(err).__name__})"
    return state if isinstance(state, dict) else "its JSON is not an object"


def _brief(state: Mapping[str, Any]) -> str:
    return ", ".join(sorted(map(str, state)))[:200]
