"""A checkpoint's pickle, scanned before torch loads it: its size in opcodes and every call.

torch's weights-only unpickler refuses unknown globals, but some it allows compute or allocate
by their arguments: ``builtins.bytearray(N)`` allocates N bytes (a 600-byte file, 2 GB),
``_codecs.encode(s, "punycode")`` takes time quadratic in ``s``, ``torch.FloatTensor(N)`` or
``torch.UntypedStorage(N)`` allocate N elements, ``_rebuild_qtensor`` allocates the size it is
given, ``_rebuild_device_tensor_from_cpu_tensor`` converts (reads) tensor data. So before
loading, :func:`scan_pickle` runs the pickle symbolically in one linear pass -- a stack of
stand-ins (small ints and strings as themselves, globals by name, everything else opaque), no
object built -- counts the opcodes that build or store an object against the ``pickle_ops``
budget (:mod:`tensorviz.core.limits`), and checks every call (``REDUCE``, ``NEWOBJ``, and the
call inside ``_rebuild_from_type_v2``): only calls whose cost is linear in what the pickle
itself holds are allowed; ``bytes`` and ``bytearray`` only the way pickle writes them (latin-1
text). Anything else is refused with an :class:`~tensorviz.core.errors.UnsafeCheckpointError`
naming the call and its byte in the pickle. Opcodes the weights-only unpickler does not know
end the scan: torch refuses them there, and nothing after them runs.
"""

from __future__ import annotations

import struct
from _compat_pickle import IMPORT_MAPPING, NAME_MAPPING
from typing import Any

from tensorviz.core import limits
from tensorviz.core.errors import FileFormatError, TooLargeError, UnsafeCheckpointError
from tensorviz.sources.parts import short

__all__ = ["scan_pickle", "unsafe_message", "FREE_CALLS", "TUPLE_ITEMS", "PER_TENSOR_OPS"]

#: Opcodes each tensor reference (``BINPERSID``) adds to the ``pickle_ops`` budget, up to the
#: ``tensor_refs`` budget of references: a state dict costs about 30 per tensor, so a valid
#: checkpoint of any size up to ``tensor_refs`` tensors is read without raising a budget, while
#: opcodes that build no tensor stay within the fixed ``pickle_ops``. The cost is stated per
#: tensor (about twice ``torch.load(weights_only=True)``'s own: tensorviz scans, then lets torch
#: unpickle), never per record: an empty ``data/N`` record adds nothing.
PER_TENSOR_OPS = 40

_U = "torch._utils."
#: Calls whose cost is linear in the arguments the pickle holds (or constant): allowed.
FREE_CALLS = frozenset(
    {
        "collections.OrderedDict",
        "collections.Counter",
        "builtins.set",
        "builtins.complex",
        "torch.Size",
        "torch.device",
        "torch.serialization._get_layout",
        "torch.nn.parameter.Parameter",
        *(
            _U + f
            for f in (
                "_rebuild_tensor",
                "_rebuild_tensor_v2",
                "_rebuild_tensor_v3",
                "_rebuild_parameter",
                "_rebuild_parameter_with_state",
                "_rebuild_meta_tensor_no_storage",
                "_rebuild_wrapper_subclass",
                "_rebuild_nested_tensor",
                "_rebuild_sparse_tensor",
            )
        ),
    }
)
_LATIN1 = ("latin1", "latin-1", "latin_1", "iso-8859-1", "iso8859-1", "l1")
#: A quantized tensor is allocated at its full size before its storage is set: at most this many.
QTENSOR_ELEMENTS = 1 << 26


class _Opaque:
    """A value the scan does not follow (a container, a tensor, a call's result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "…"


class _Global(str):
    """A global by its full name (after pickle's Python 2 name mapping, as torch applies it)."""


class _Long:
    """A string too long to keep: its length only."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"<str of {self.n:,} chars>"


class _Bytes:
    """What ``_codecs.encode(text, "latin1")`` gives: bytes, as long as the text."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<bytes>"


_BYTES = _Bytes()

_OPAQUE = _Opaque()
_KEEP_CHARS = 64


class _Refused(Exception):
    def __init__(self, call: str, why: str, unknown: str = "") -> None:
        super().__init__(call, why)
        self.call, self.why, self.unknown = call, why, unknown


def _torch_allows(name: str) -> bool:
    """Whether torch's weights-only unpickler may allow ``name`` (its own allowlist's shape)."""
    if name.startswith(("torch._utils.", "torch._tensor.", "torch.storage.", "torch.serialization.", "collections.")):
        return True
    legacy = name.startswith("torch.") and name.count(".") <= 2 and name.endswith(("Tensor", "Storage"))
    return legacy or name in (
        "torch.Size",
        "torch.device",
        "torch.nn.parameter.Parameter",
        "_codecs.encode",
        "builtins.bytearray",
        "builtins.set",
        "builtins.complex",
    )


def global_hint(name: str) -> str:
    """Words for a global a refused pickle needs, when they point to a way out.

    >>> global_hint("torch.nn.modules.linear.Linear")[:25]
    ' (a whole nn.Module was s'
    """
    if name.startswith("torch.nn.modules."):
        return " (a whole nn.Module was saved; saving model.state_dict() avoids this)"
    if name.startswith("deepspeed."):
        return (
            " (a DeepSpeed ZeRO optimizer partition pickles DeepSpeed objects: tensorviz reads their "
            "records as data when the file keeps DeepSpeed's name, [bf16_]zero_pp_rank_<R>_mp_rank_<M>"
            "_optim_states.pt, or its folder is passed; DeepSpeed's ds_to_universal.py writes the same "
            "state as plain tensors per parameter, a folder tensorviz reads too)"
        )
    return ""


def unsafe_message(path: str, what: str, hint: str = "") -> str:
    """The refusal of a pickle that needs code (``what``): never run, and how to load it if trusted."""
    return (
        f"{path}: {what}{hint}. tensorviz loads checkpoints only with torch.load(weights_only=True) "
        f"and never runs code from a file, because unpickling can execute anything. If you trust "
        f"the file, load it yourself and pass the result: "
        f"tv.analyze(torch.load(path, weights_only=False, mmap=True))"
    )


def _latin1(x: Any) -> bool:
    return type(x) is str and x.lower() in _LATIN1


def _check_call(func: Any, args: Any, newobj: bool = False, records: frozenset[str] = frozenset()) -> None:
    """Refuse a call whose cost is not linear in what the pickle holds (raises ``_Refused``);
    ``records``: globals the caller unpickles as inert stand-ins of its own (never called)."""
    if not isinstance(func, _Global):
        raise _Refused(f"{short(func)}(…)", "it calls a value that is not a named global")
    if func in records:
        return
    if not _torch_allows(func):
        raise _Refused(func, "", unknown=func)
    if func in FREE_CALLS:
        return
    shown = f"{func}{short(args) if isinstance(args, tuple) else '(…)'}"  # only for a refusal
    if func in ("_codecs.encode", "builtins.bytearray"):
        if newobj and func == "builtins.bytearray":
            return  # bytearray.__new__ without __init__: an empty bytearray
        if func == "builtins.bytearray" and (args == () or (isinstance(args, tuple) and args[:1] == (_BYTES,))):
            return  # bytearray(bytes): a copy of bytes the pickle holds
        if isinstance(args, tuple) and len(args) == 2 and isinstance(args[0], (str, _Long)) and _latin1(args[1]):
            return
        raise _Refused(shown, "its cost grows with its arguments (an allocation by a number, or a codec's work)")
    if func == "torch._tensor._rebuild_from_type_v2" and isinstance(args, tuple) and len(args) == 4:
        _check_call(args[0], args[2])
        return
    if func == _U + "_rebuild_qtensor" and isinstance(args, tuple) and len(args) >= 3:
        size = args[2]
        if isinstance(size, tuple) and all(type(d) is int and d >= 0 for d in size):
            n = 1
            for d in size:
                n *= d
            if n <= QTENSOR_ELEMENTS:
                return
        raise _Refused(shown, f"torch allocates a quantized tensor at its full size first (over {QTENSOR_ELEMENTS:,})")
    raise _Refused(shown, "it allocates or converts by its arguments (tensorviz calls only tensor rebuilders)")


def _global(data: bytes, i: int) -> tuple[_Global, int]:
    j = data.index(b"\n", i)
    k = data.index(b"\n", j + 1)
    module, name = data[i:j].decode("utf-8"), data[j + 1 : k].decode("utf-8")
    if (module, name) in NAME_MAPPING:
        module, name = NAME_MAPPING[(module, name)]
    elif module in IMPORT_MAPPING:
        module = IMPORT_MAPPING[module]
    return _Global(f"{module}.{name}"), k + 1


def scan_pickle(path: str, data: bytes, *, calls: bool = True, records: frozenset[str] = frozenset()) -> int:
    """Scan ``data`` (a checkpoint's ``data.pkl``, or with ``calls=False`` a DCP ``.metadata``,
    whose globals its own unpickler restricts): the opcodes counted.

    Raises:
        TooLargeError: more opcodes than the ``pickle_ops`` budget, or a tuple of shared
            references that expands past :data:`TUPLE_ITEMS` (hashing or printing it would).
        UnsafeCheckpointError: a call whose cost grows with its arguments (with ``calls``);
            ``records`` names globals the caller's own unpickler turns into inert stand-ins
            (:mod:`tensorviz.sources.formats.zero_optim`), allowed as calls here.
        FileFormatError: (``calls=False``) an opcode outside what ``pickle.dump`` writes.
    """
    try:
        return _scan(data, limits.current().pickle_ops, calls, records)
    except _Budget:
        raise limits.exceeded(
            path, "pickle_ops", f"{len(data):,} bytes of pickle, beyond {PER_TENSOR_OPS} for each tensor it references"
        ) from None
    except _Expands as err:
        raise TooLargeError(
            f"{path}: its pickle builds a tuple of shared references that expands to more than "
            f"{TUPLE_ITEMS:,} items (byte {err.args[0]}); hashing, copying or printing it would take "
            f"time and memory exponential in the pickle's size, so tensorviz refuses it"
        ) from None
    except _Unknown as err:
        raise FileFormatError(
            f"{path}: not a readable DCP metadata pickle (opcode {err.args[0]:#04x} at byte {err.args[1]}, "
            f"which pickle.dump does not write for it); tensorviz refuses to unpickle it"
        ) from None
    except _Refused as err:
        if err.unknown:
            what = f"the pickle needs {short(err.unknown, 200)[1:-1]}"
            raise UnsafeCheckpointError(unsafe_message(path, what, global_hint(err.unknown))) from None
        raise UnsafeCheckpointError(
            f"{path}: its pickle calls {err.call}; {err.why}. tensorviz never evaluates a call from a file "
            f"whose cost depends on its arguments (torch's weights-only unpickler allows this one). If you "
            f"trust the file, load it yourself and pass the result: tv.analyze(torch.load(path, "
            f"weights_only=True, mmap=True))"
        ) from None


class _Budget(Exception):
    pass


class _Expands(Exception):
    pass


class _Unknown(Exception):
    pass


#: Most items a tuple may expand to, counting shared references as often as they appear.
TUPLE_ITEMS = 1_000_000


class _Tup(tuple):
    """A tuple the scan built, with ``n``: the items it expands to (shared ones counted each time)."""

    n = 1


def _tup(items: Any, at: int) -> _Tup:
    t = _Tup(items)
    n = 1
    for x in items:
        n += x.n if type(x) is _Tup else 1
    if n > TUPLE_ITEMS:
        raise _Expands(at)
    t.n = n
    return t


_SIZED = {0x58: 4, 0x8C: 1, 0x8D: 8, 0x42: 4, 0x43: 1, 0x8E: 8, 0x96: 8}  # length-prefixed data


_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_STOP = -1


def _scan(data: bytes, cap: int, calls: bool = True, records: frozenset[str] = frozenset()) -> int:  # noqa: C901, PLR0912 - one branch per opcode
    """The symbolic run (see the module docstring); returns at STOP, at an unknown or malformed
    opcode (torch refuses it there), or raises ``_Budget``/``_Refused``/``_Expands``/``_Unknown``.
    The common opcodes are here; the rest in :func:`_rare`."""
    st: list[Any] = []
    meta: list[list[Any]] = []
    memo: dict[int, Any] = {}
    i, n, ops = 0, len(data), 0
    refs, max_refs = 0, limits.current().tensor_refs
    opaque = _OPAQUE
    try:
        while i < n:
            c = data[i]
            at = i
            i += 1
            if c == 0x71:  # BINPUT
                memo[data[i]] = st[-1]
                i += 1
            elif c == 0x68:  # BINGET
                st.append(memo.get(data[i], opaque))
                i += 1
            elif c == 0x28:  # MARK
                meta.append(st)
                st = []
                continue  # free
            elif c in _SIZED:  # strings and bytes
                i = _sized(c, data, i, st)
            elif c == 0x4B:  # BININT1
                st.append(data[i])
                i += 1
            elif c == 0x74:  # TUPLE
                items, st = st, meta.pop()
                st.append(_tup(items, at))
            elif c in (0x85, 0x86, 0x87):  # TUPLE1, TUPLE2, TUPLE3
                k = c - 0x84
                if len(st) < k:
                    return ops
                st[-k:] = [_tup(tuple(st[-k:]), at)]
            elif c in (0x52, 0x81):  # REDUCE, NEWOBJ
                args = st.pop()
                if calls:
                    _check_call(st[-1], args, newobj=c == 0x81, records=records)
                st[-1] = _BYTES if st[-1] == "_codecs.encode" else opaque
            elif c == 0x63:  # GLOBAL
                g, i = _global(data, i)
                st.append(g)
            elif c in (0x75, 0x65, 0x90):  # SETITEMS, APPENDS, ADDITEMS
                st = meta.pop()
                if not st:
                    return ops
            elif c in (0x73, 0x61, 0x62):  # SETITEM, APPEND, BUILD
                del st[-2 if c == 0x73 else -1 :]
                if not st:
                    return ops
            elif c in (0x7D, 0x5D, 0x8F):  # EMPTY_DICT, EMPTY_LIST, EMPTY_SET
                st.append(opaque)
            else:
                i = _rare(c, data, i, st, memo, calls, at)
                if i == _STOP:
                    return ops
                if c in (0x80, 0x95):  # PROTO, FRAME: free
                    continue
                if c == 0x51 and refs < max_refs:  # BINPERSID: a tensor's storage, credited
                    refs += 1
                    cap += PER_TENSOR_OPS
            ops += 1
            if ops > cap:
                raise _Budget
            if i > n:
                return ops
    except (IndexError, ValueError, UnicodeDecodeError, struct.error, KeyError, TypeError):
        return ops  # malformed: the unpickler reports it
    return ops


def _sized(c: int, data: bytes, i: int, st: list) -> int:
    """A length-prefixed string or bytes: pushed (a short string as itself); the next offset."""
    w = _SIZED[c]
    size = int.from_bytes(data[i : i + w], "little")
    i += w
    if c in (0x58, 0x8C, 0x8D):
        keep = size <= _KEEP_CHARS
        st.append(data[i : i + size].decode("utf-8", "surrogatepass") if keep else _Long(size))
    else:
        st.append(_OPAQUE)
    return i + size


def _rare(c: int, data: bytes, i: int, st: list, memo: dict, calls: bool, at: int) -> int:  # noqa: PLR0911, PLR0912
    """The less common opcodes; the next offset, or ``_STOP`` (STOP, or one torch refuses)."""
    if c == 0x94:  # MEMOIZE
        memo[len(memo)] = st[-1]
    elif c == 0x4D:  # BININT2
        st.append(data[i] | data[i + 1] << 8)
        return i + 2
    elif c == 0x4A:  # BININT
        st.append(_I32(data, i)[0])
        return i + 4
    elif c == 0x8A:  # LONG1
        size = data[i]
        st.append(int.from_bytes(data[i + 1 : i + 1 + size], "little", signed=True))
        return i + 1 + size
    elif c == 0x51:  # BINPERSID
        st[-1] = _OPAQUE
    elif c == 0x93 and not calls:  # STACK_GLOBAL (DCP metadata; torch's unpickler refuses it)
        name = st.pop()
        st[-1] = _Global(f"{st[-1]}.{name}")
    elif c == 0x29:  # EMPTY_TUPLE
        st.append(_tup((), at))
    elif c in (0x4E, 0x88, 0x89):  # NONE, NEWTRUE, NEWFALSE
        st.append(None if c == 0x4E else c == 0x88)
    elif c in (0x72, 0x6A):  # LONG_BINPUT, LONG_BINGET
        k = _U32(data, i)[0]
        if c == 0x72:
            memo[k] = st[-1]
        else:
            st.append(memo.get(k, _OPAQUE))
        return i + 4
    elif c == 0x47:  # BINFLOAT
        st.append(_OPAQUE)
        return i + 8
    elif c == 0x55:  # SHORT_BINSTRING
        size = data[i]
        st.append(data[i + 1 : i + 1 + size])
        return i + 1 + size
    elif c in (0x80, 0x95):  # PROTO, FRAME
        return i + (1 if c == 0x80 else 8)
    elif c == 0x2E or calls:  # STOP, or an opcode torch's weights-only unpickler refuses
        return _STOP
    else:
        raise _Unknown(c, at)
    return i
