"""What each saver would do, replayed with the installed libraries' own functions on stand-ins.

Every ``evaluate_*`` function takes a ``{name: StandIn}`` state dict (see
:mod:`tensorviz.savecheck.standin`) and returns a :class:`Run`: the exception the library would raise
(type and exact message), or the names and stand-ins it would write, the names it would drop,
the groups its sharing check reported, and what it would log. No file is written and no tensor
byte is read: the libraries' metadata helpers see stand-ins, steps that run torch ops see meta
twins (:meth:`StandIn.meta_twin`), tensors that are not plain strided ones are :class:`Opaque`
records no library sees, and the steps that would touch data (serialising, ``.to("cpu")``) are
replayed from their documented preconditions. Nothing of any library is swapped or patched:
where a library function cannot run without a side effect (accelerate's logger), its rule is
re-done here from its source, cited where it is.

A missing or changed private helper raises :class:`Unavailable`; the caller reports
"could not evaluate: ..." for that saver only.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from tensorviz.savecheck.standin import Opaque, StandIn, SubclassStandIn, _WouldReadData

__all__ = [
    "Run",
    "Unavailable",
    "evaluate_save_file",
    "evaluate_save_model",
    "safetensors_file_nbytes",
    "version",
]


class Unavailable(Exception):
    """A library helper this evaluation relies on is missing or behaves unexpectedly."""


@dataclass
class Run:
    """One saver's decisions, in the library's own terms."""

    given: tuple[str, ...]
    error: tuple[str, str] | None = None
    written: dict[str, Any] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    anchor: list[frozenset[str]] | None = None
    anchor_error: tuple[str, str] | None = None
    anchor_name: str = ""
    logs: list[str] = field(default_factory=list)
    files: list[tuple[str, dict[str, Any], dict[str, str] | None]] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (given name, name written)
    ignored: list[str] = field(default_factory=list)  # left out by the model's own rule
    carried: list[str] = field(default_factory=list)  # given names written under other names
    file_nbytes: int | None = None
    notes: list[str] = field(default_factory=list)


def version(dist: str) -> str | None:
    """Installed version of a distribution, or None."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed(dist: str) -> str | None:
    """The version of a distribution that can be imported here (its module of the same name), or
    None: not installed, or its import blocked (``sys.modules[dist] = None``)."""
    import importlib.util

    ver = version(dist)
    return ver if ver is not None and importlib.util.find_spec(dist) is not None else None


def _helper(module: str, name: str) -> Any:
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise Unavailable(f"cannot import {module}: {err}") from None
    fn = getattr(mod, name, None)
    if fn is None:
        raise Unavailable(f"{module}.{name} does not exist in this version")
    return fn


def _err(e: BaseException) -> tuple[str, str]:
    return type(e).__name__, str(e)


def _guard(e: BaseException) -> None:
    """Re-raise as Unavailable when ``e`` says the evaluation, not the library, went wrong."""
    if isinstance(e, _WouldReadData):
        raise Unavailable(f"the library went on to read tensor data ({e})") from None
    if isinstance(e, (AttributeError, TypeError)) and not _on_a_plain_value(e):
        raise Unavailable(f"a library helper changed ({type(e).__name__}: {e})") from None


#: "'torch.dtype' object has no attribute 'device'": the library met a value of the user's state
#: dict that is no tensor (torch.ao's packed params hold a dtype and a tuple) and failed on it, as
#: the real call does -- its own error, not a sign that the replay is out of date.
_PLAIN_VALUE = re.compile(
    r"^'(torch\.dtype|torch\.device|torch\.Size|tuple|list|dict|int|float|bool|str|bytes|NoneType)' "
    r"object (has no attribute|is not subscriptable|is not callable)"
)


def _on_a_plain_value(e: BaseException) -> bool:
    return _PLAIN_VALUE.match(str(e)) is not None


@contextlib.contextmanager
def _library_failure(run: Run) -> Iterator[None]:
    """Record the library's own exception as the verdict (nothing written); re-raise ours."""
    try:
        yield
    except Unavailable:
        raise
    except Exception as e:  # noqa: BLE001 - the library's own failure is a finding
        _guard(e)
        run.error = _err(e)
        run.written.clear()
        run.files.clear()


def _dropped(run: Run, names: Any) -> list[str]:
    """Names the save left out; none when it raised (then nothing was written at all)."""
    return [k for k in names if k not in run.written] if run.error is None else []


def _only_standins(sd: dict[str, Any], saver: str) -> None:
    """accelerate and transformers call .contiguous()/.clone() on what they get: only stand-ins
    may reach them. Other tensors (sparse, quantized, subclasses) stop here, with the reason."""
    for name, v in sd.items():
        if isinstance(v, Opaque):
            raise Unavailable(
                f"tensorviz replays {saver} on plain strided tensors only; {name!r} is not one ({v.reason})"
            )


def _anchor(run: Run, sd: dict[str, Any], module: str, name: str, memo: dict | None = None) -> None:
    """Record the groups a library's sharing check reports (or the error it raises); ``memo``
    keeps them for the other savers of the same check (they are given the same dict)."""
    fn = _helper(module, name)
    run.anchor_name = f"{module}.{name}"
    if memo is not None and (module, name) in memo:
        run.anchor, run.anchor_error = memo[module, name]
        return
    tensors = {k: v for k, v in sd.items() if isinstance(v, StandIn)}
    try:
        run.anchor = list(fn(tensors))  # sets of names, one per storage (never changed)
    except Exception as e:  # noqa: BLE001 - the library's own failure is a finding
        _guard(e)
        run.anchor_error = _err(e)
    if memo is not None:
        memo[module, name] = (run.anchor, run.anchor_error)


# -- safetensors -------------------------------------------------------------------------------
_ST = "safetensors.torch"


#: Answers shared by the savers of one check (several hand safetensors the very same tensors).
#: A context variable: each thread (and each check) sees only its own.
CHECK_MEMO: contextvars.ContextVar[dict | None] = contextvars.ContextVar("tensorviz_check_memo", default=None)


def memoised(kind: str, sd: dict[str, Any], extra: Any, compute: Any) -> Any:
    """``compute()``, or its earlier result for the same names, objects and ``extra`` in this check."""
    memo = CHECK_MEMO.get()
    if memo is None:
        return compute()
    values = tuple(sd.values())
    key = (kind, tuple(sd), tuple(map(id, values)), extra)
    if key not in memo:  # the entry keeps the values alive: no id is reused while the check runs
        try:
            memo[key] = (compute(), None, values)
        except Exception as e:  # noqa: BLE001 - the same failure again for the same input
            memo[key] = (None, e, values)
    value, error, _ = memo[key]
    if error is not None:
        try:
            raise error
        finally:  # this frame joins the error's traceback: a local kept here would hold it in a cycle
            error = None
    return value


def _check_save_file(sd: dict[str, Any]) -> None:
    """Raise exactly what ``safetensors.torch.save_file(sd, ...)`` raises before writing, if anything."""
    memoised("save_file", sd, None, lambda: _check_save_file_once(sd))


def _check_save_file_once(sd: dict[str, Any]) -> None:
    _helper(_ST, "_evaluate_tensors_for_save")(_own_opaques(sd))  # type, sparse and sharing checks
    flatten = _helper(_ST, "_flatten_as_ptr")
    sizes = _helper(_ST, "_SIZE")
    freed = []
    for k, v in sd.items():  # the per-tensor loop of _flatten_as_ptr, in the same order
        if isinstance(v, SubclassStandIn):
            raise Unavailable(
                f"{k!r} is a {v.kind} whose own storage has an address: safetensors would go on to copy its "
                f"data through the subclass's own code, which tensorviz does not replay"
            )
        if not v.is_contiguous():
            flatten({k: v._twin()}, [])  # a meta twin: the library raises its own message
            raise Unavailable(f"safetensors accepted the non-contiguous tensor {k!r}")
        if v.device.type == "meta":
            _helper(_ST, "_to_ndarray")(v._twin())  # "Cannot copy out of meta tensor; no data!"
            raise Unavailable("safetensors accepted a meta tensor")
        if v.dtype not in sizes:
            raise KeyError(v.dtype)
        if v.is_freed():
            freed.append((k, v))
    if freed:
        _serialize_freed(*freed[0])


def _serialize_freed(name: str, v: StandIn) -> None:
    """A freed storage reports address 0, for which safetensors' ``_to_ndarray`` hands over no
    bytes at all; its serializer then refuses the tensor. Asked with that same empty spec (zero
    bytes: nothing is read), it raises its own error."""
    if v.untyped_storage().data_ptr() != 0:
        raise Unavailable(
            f"{name!r} reads {v.reach_nbytes()} B of a storage shrunk to {v.untyped_storage().nbytes()} B: "
            f"a real save would read memory the tensor does not own"
        )
    spec = _helper("safetensors", "TensorSpec")
    serialize = _helper("safetensors", "serialize")
    serialize({name: spec(dtype=str(v.dtype).split(".")[-1], shape=list(v.shape), data_ptr=0, data_len=0)}, None)
    raise Unavailable(f"safetensors accepted the freed tensor {name!r}")


def _own_opaques(sd: dict[str, Any]) -> dict[str, Any]:
    """The dict safetensors' first check sees: a sparse tensor stands in as a one-element sparse
    tensor made here (the check reads only its layout, and refuses it by name); other opaque
    tensors pass that check as a plain one would. Without a sparse one, opaque tensors end it."""
    opaques = [v for v in sd.values() if isinstance(v, Opaque)]
    if opaques and not any(v.layout for v in opaques):
        first = opaques[0]
        raise Unavailable(
            f"tensorviz replays save_file on plain strided tensors only; {first.name!r} is not one ({first.reason})"
        )
    return {k: v.own_tensor() if isinstance(v, Opaque) else v for k, v in sd.items()}


def _save_file_into(run: Run, sd: dict[str, Any], metadata: dict[str, str] | None) -> None:
    _check_save_file(sd)
    run.written.update(sd)
    run.files.append(("model.safetensors", dict(sd), metadata))


def evaluate_save_file(sd: dict[str, Any], memo: dict | None = None) -> Run:
    """``safetensors.torch.save_file(state_dict, path)``."""
    run = Run(tuple(sd))
    _anchor(run, sd, _ST, "_find_shared_tensors", memo)
    try:
        _save_file_into(run, dict(sd), None)
    except Unavailable:
        raise
    except Exception as e:  # noqa: BLE001
        _guard(e)
        run.error = _err(e)
    return run


_SAVE_MODEL_HINT = " Or use save_model(..., force_contiguous=True), read the docs for potential caveats."


def evaluate_save_model(sd: dict[str, Any], memo: dict | None = None) -> Run:
    """``safetensors.torch.save_model(model, path)``, step by step as safetensors writes it.

    Read from safetensors' own ``save_model`` (bindings/python/py_src/safetensors/torch.py,
    0.4 to 0.8): its pure helper ``_remove_duplicate_names`` picks the name kept per storage,
    each dropped name goes into the metadata (never over a key already there), every tensor is
    made ``.contiguous()``, ``save_file`` runs (here the metadata-only check above) and a
    ``ValueError`` from it gets the library's hint appended. Nothing of safetensors is swapped.
    """
    run = Run(tuple(sd))
    _anchor(run, sd, _ST, "_find_shared_tensors", memo)
    remove_duplicates = _helper(_ST, "_remove_duplicate_names")
    _only_standins(sd, "save_model")
    with _library_failure(run):
        state = dict(sd)
        metadata: dict[str, str] | None = None
        for kept_name, removed in remove_duplicates(state).items():
            for name in removed:
                metadata = {} if metadata is None else metadata
                metadata.setdefault(name, kept_name)
                del state[name]
        state = {k: v.contiguous() for k, v in state.items()}
        try:
            _save_file_into(run, state, metadata)
        except ValueError as e:
            raise ValueError(str(e) + _SAVE_MODEL_HINT) from None
    run.dropped = _dropped(run, sd)
    if run.dropped:
        run.notes.append(
            "the file's __metadata__ maps each dropped name to the name kept; load_model(model, path) puts them back"
        )
    return run


# Order safetensors writes tensors in (descending dtype, then name); only the digits of the
# offsets depend on it. Codes as in the file header.
_ST_DTYPES = [
    ("uint64", "U64"),
    ("int64", "I64"),
    ("float64", "F64"),
    ("complex64", "C64"),
    ("float32", "F32"),
    ("uint32", "U32"),
    ("int32", "I32"),
    ("bfloat16", "BF16"),
    ("float16", "F16"),
    ("uint16", "U16"),
    ("int16", "I16"),
    ("float8_e5m2fnuz", "F8_E5M2FNUZ"),
    ("float8_e4m3fnuz", "F8_E4M3FNUZ"),
    ("float8_e8m0fnu", "F8_E8M0"),
    ("float8_e4m3fn", "F8_E4M3"),
    ("float8_e5m2", "F8_E5M2"),
    ("int8", "I8"),
    ("uint8", "U8"),
    ("bool", "BOOL"),
]
_ST_RANK = {name: (i, code) for i, (name, code) in enumerate(_ST_DTYPES)}
_ST_BY_DTYPE = {getattr(torch, name): i for i, (name, _) in enumerate(_ST_DTYPES) if hasattr(torch, name)}


def safetensors_file_nbytes(tensors: dict[str, Any], metadata: dict[str, str] | None) -> int | None:
    """Exact size of the safetensors file these tensors make (see :func:`_file_nbytes`)."""
    extra = None if metadata is None else tuple(metadata.items())
    return memoised("file_nbytes", tensors, extra, lambda: _file_nbytes(tensors, metadata))


def _file_nbytes(tensors: dict[str, Any], metadata: dict[str, str] | None) -> int | None:
    """Exact size of the safetensors file these tensors make: 8 + padded JSON header + data.

    The header is ``{"__metadata__":{...},NAME:{"dtype":CODE,"shape":[...],"data_offsets":[a,b]},...}``,
    compact, tensors in safetensors' order (descending dtype, then name); its length is summed
    entry by entry. None when a dtype is not one whose header code tensorviz knows.
    """
    entries = []
    for name, t in tensors.items():
        rank = _ST_BY_DTYPE.get(t.dtype)
        if rank is None:
            return None
        entries.append((rank, name, t))
    entries.sort(key=lambda e: (e[0], e[1]))
    n = 2 + max(len(entries) + (metadata is not None) - 1, 0)  # braces, commas
    if metadata is not None:
        n += len('"__metadata__":') + _json_len(metadata)
    offset = 0
    for rank, name, t in entries:
        a = offset
        offset += t.nelement() * t.element_size()
        shape = ",".join(map(str, t.shape))
        n += _json_len(name) + _ENTRY_FIXED + len(_ST_DTYPES[rank][1]) + len(shape) + len(str(a)) + len(str(offset))
    return 8 + (n + 7) // 8 * 8 + offset


_ENTRY_FIXED = len(':{"dtype":"' + '","shape":[' + '],"data_offsets":[' + "," + "]}")
_PLAIN_NAME = re.compile(r"[ -~]*").fullmatch  # printable ASCII: JSON adds only quotes, escapes " and \\


def _json_len(x: Any) -> int:
    """Bytes of ``x`` as compact JSON in UTF-8 (as the safetensors header writes it)."""
    if isinstance(x, str) and _PLAIN_NAME(x):
        return len(x) + 2 + x.count('"') + x.count("\\")
    return len(json.dumps(x, ensure_ascii=False, separators=(",", ":")).encode())
