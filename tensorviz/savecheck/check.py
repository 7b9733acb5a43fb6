"""The save check's steps: collect facts up front, ask each saver, read the bytes exactly.

Step 1 (:func:`_subject`) turns the object into a layout, a ``{name: StandIn}`` state dict as
each saver would receive it, and the module-only facts (ties, meta parameters) -- after which
no tensor or module is referenced. Step 2 runs each saver's evaluation
(:mod:`tensorviz.savecheck.savers.common` and its siblings). Step 3 (:func:`_verdict`) accounts bytes from the layout's exact
footprints, lists misfires, and asks :mod:`tensorviz.savecheck.fixes` for fixes.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch

from tensorviz.core.keepalive import kept_alive_lines
from tensorviz.core.keywords import EXTRA_OF
from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo, TensorView
from tensorviz.core.units import format_bytes
from tensorviz.savecheck import accounting as acc
from tensorviz.savecheck.fixes import attach_fixes
from tensorviz.savecheck.materialise import as_materialised, has_meta
from tensorviz.savecheck.misfires import misfires as _misfires
from tensorviz.savecheck.misfires import sub_layout as _sub
from tensorviz.savecheck.outcomes import FSDP_MID_STEP
from tensorviz.savecheck.savers import common as sv
from tensorviz.savecheck.savers.peft_adapter import is_peft_model
from tensorviz.savecheck.savers.rules import SAVER_RULES, LibraryRule
from tensorviz.savecheck.standin import (
    StandIn,
    SubclassStandIn,
    from_subclass,
    from_tensor,
    from_view,
    opaque,
    storage_error,
)
from tensorviz.savecheck.subject import Subject
from tensorviz.savecheck.verdicts import Verdict
from tensorviz.sources.distributed.fsdp_units import fsdp_mid_step_state
from tensorviz.sources.subclasses import flatten, is_traceable

__all__ = ["run_check", "versions"]


def run_check(obj: Any, wanted: tuple[str, ...]) -> tuple[tuple[Verdict, ...], Subject]:
    """Each wanted saver's verdict (fixes attached), and the subject they were judged on (it holds
    no tensor or module any more)."""
    subject = _subject(obj)
    verdicts = []
    memo: dict = {}
    token = sv.CHECK_MEMO.set(memo)
    try:
        for saver in wanted:
            why_not = _not_run(SAVER_RULES[saver], subject)
            if why_not:
                subject.not_run.append((saver, why_not))
                continue
            verdicts.append(_evaluate(saver, subject))
    finally:
        memo.clear()  # a kept exception's traceback holds this frame: a cycle through every stand-in
        sv.CHECK_MEMO.reset(token)
    subject.real_state_dict = subject.pretrained = subject.peft = None
    return tuple(attach_fixes(verdicts, subject)), subject


# -- step 1: the subject ----------------------------------------------------------------------------
def _subject(obj: Any) -> Subject:
    subject = _plain_subject(obj)
    if has_meta(subject.layout):
        as_materialised(subject)
    return subject


def _plain_subject(obj: Any) -> Subject:
    if isinstance(obj, (str, os.PathLike)):
        from tensorviz.sources import analyze

        obj = analyze(obj)
    if isinstance(obj, Layout):
        return _layout_subject(obj)
    from tensorviz.sources.live import analyze_object

    layout = analyze_object(obj)
    if isinstance(obj, torch.nn.Module):
        subject = _module_subject(obj, layout)
    elif isinstance(obj, Mapping):
        subject = _mapping_subject(obj, layout)
    else:  # a tensor or a sequence: the names tensorviz gives them, as a plain dict
        from tensorviz.sources.live import iter_named_values

        sd = dict(iter_named_values(obj))
        subject = Subject(type(obj).__qualname__, layout, "mapping", _standins(sd, layout), False, real_state_dict=sd)
        subject.notes.append("not a mapping: checked as the dict {name: tensor} with tensorviz's names")
    return subject


def _module_subject(obj: torch.nn.Module, layout: Layout) -> Subject:
    from tensorviz.savecheck.ties import module_ties

    if (sd := fsdp_mid_step_state(obj)) is not None:  # FSDP2 mid-step: state_dict() would reshard it
        subject = Subject(type(obj).__qualname__, layout, "mapping", _standins(sd), True, real_state_dict=sd)
        subject.notes.append(FSDP_MID_STEP)
        return subject
    # the stand-ins read metadata only: the module's own tensors do (no detached copies made);
    # torch.save's dry run asks for the state dict itself, when it runs (see savecheck.rules)
    sd = obj.state_dict(keep_vars=True)
    subject = Subject(type(obj).__qualname__, layout, "module", _standins(sd, layout), True, real_state_dict=obj)
    meta = any(isinstance(t, StandIn) and t.device.type == "meta" for t in subject.standins.values())
    subject.has_meta_parameters = meta and any(p.device.type == "meta" for p in obj.parameters())
    subject.ties = module_ties(obj, layout)
    if _is_pretrained(obj):
        subject.pretrained = obj
    elif _is_pretrained(inner := getattr(obj, "_orig_mod", None)) and isinstance(obj, _optimized_module()):
        subject.pretrained = inner  # torch.compile: compiled.save_pretrained is the model's own
    if is_peft_model(obj):
        subject.peft = obj
    return subject


def _mapping_subject(obj: Mapping, layout: Layout) -> Subject:
    ordered = isinstance(obj, collections.OrderedDict)
    subject = Subject(type(obj).__qualname__, layout, "mapping", _standins(obj, layout), ordered, real_state_dict=obj)
    odd = [k for k in obj if not isinstance(k, str)]
    if odd:
        subject.standins = {str(k): v for k, v in subject.standins.items()}
        subject.key_problem = (
            f"key {odd[0]!r} is a {type(odd[0]).__name__}, not a str: tensorviz replays the savers that write "
            f"names (safetensors, transformers, accelerate) on str keys only; only torch.save is checked"
        )
    return subject


def _standins(sd: Mapping[str, Any], layout: Layout | None = None) -> dict[str, Any]:
    """Stand-ins for plain strided tensors and for traceable subclasses the layout holds in pieces
    (:class:`SubclassStandIn`), :class:`Opaque` records for other tensors (the savers never see
    those), and any other value as it is, so the savers reject it with their message."""
    storages: dict = {}
    out: dict[str, Any] = {}
    pieces = pieces_of(layout) if layout is not None else {}
    for name, value in sd.items():
        if not isinstance(value, torch.Tensor):
            out[name] = value
        elif _plain(value):
            out[name] = from_tensor(str(name), value, storages)
        elif str(name) in pieces and is_traceable(value):
            out[name] = sub = from_subclass(str(name), value, pieces[str(name)])
            inner = flatten(value)
            for path, t in inner if isinstance(inner, list) else ():
                if _plain(t):
                    sub.inner[path] = from_tensor(f"{name}.{path}", t, storages)
        else:
            out[name] = opaque(str(name), value)
    return out


def pieces_of(layout: Layout) -> dict[str, tuple[str, ...]]:
    """Each logical tensor stored in pieces that is not itself a name of the layout (a tensor
    subclass's name) -> the names of its pieces, in layout order."""
    out: dict[str, list[str]] = {}
    raw = getattr(layout, "_raw", None)
    if raw is not None:  # the rows that are pieces, without a record for every view
        names = layout.names
        found = [(names[i], raw.pieces[i]) for i in sorted(raw.pieces)]
    else:
        found = [(v.name, v.piece) for v in layout.views if v.piece is not None]
    for name, piece in found:
        if piece.of != name:
            out.setdefault(piece.of, []).append(name)
    return {of: tuple(names) for of, names in out.items() if of not in layout}


_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
#: Per dtype, whether a plain strided tensor of it is analysable (quantized and sub-byte
#: dtypes are not: :func:`tensorviz.sources.live.why_not_analysable`).
_PLAIN_DTYPES: dict[torch.dtype, bool] = {}


def _plain(t: torch.Tensor) -> bool:
    """A tensor or Parameter (or a trivial subclass of one) that tensorviz lays out as a strided view."""
    cls = type(t)
    if cls in _PLAIN_TYPES and t.layout is torch.strided and not t.is_nested:  # decided by its dtype
        ok = _PLAIN_DTYPES.get(t.dtype)
        if ok is None:
            from tensorviz.sources.live import why_not_analysable

            ok = _PLAIN_DTYPES[t.dtype] = why_not_analysable(t) is None
        return ok
    if cls not in _PLAIN_TYPES and not isinstance(t, torch.nn.parameter.Buffer) and not _trivial(cls):
        if (cls.__module__, cls.__qualname__) not in _DATA_IN_OWN_STORAGE:
            return False
    from tensorviz.sources.live import why_not_analysable

    return why_not_analysable(t) is None


#: Parameter subclasses whose values are their own storage's bytes, read by savers as a plain
#: tensor: bitsandbytes' packed 4-bit weight and int8 weight (``_make_subclass`` over the packed
#: data; the quant state rides in Python attributes, written beside it in the state dict).
#: Read from bitsandbytes 0.4x-0.50 (``bitsandbytes/nn/modules.py``): Params4bit's
#: ``__torch_function__`` re-wraps only ``torch.chunk``/``torch.split`` results, Int8Params has
#: none; neither changes a metadata answer or ``.contiguous()``.
_DATA_IN_OWN_STORAGE = frozenset({("bitsandbytes.nn.modules", "Params4bit"), ("bitsandbytes.nn.modules", "Int8Params")})


def _trivial(cls: type) -> bool:
    """A Tensor/Parameter subclass that changes nothing torch or a saver sees: no
    ``__torch_function__``/``__torch_dispatch__`` of its own, not traceable (no
    ``__tensor_flatten__``), no ``__reduce_ex__`` of its own (``class P(nn.Parameter): pass``).
    Savers treat it as its base, so the check does too."""
    if not issubclass(cls, torch.Tensor):
        return False
    base = torch.nn.Parameter if issubclass(cls, torch.nn.Parameter) else torch.Tensor
    own = ("__torch_function__", "__torch_dispatch__", "__reduce_ex__", "__tensor_flatten__", "__new__")
    between = cls.__mro__[: cls.__mro__.index(base)]
    return not any(k in c.__dict__ for c in between for k in own)


def _layout_subject(layout: Layout) -> Subject:
    fmt = layout.facts.format
    storages: dict = {}
    sizes = {s.key: s.nbytes for s in layout.storages}
    out: dict[str, Any] = {}
    notes = []
    for v in layout.views:
        if fmt.startswith("safetensors") or fmt == "folder":
            # safetensors.load_file gives every tensor its own storage
            v = _own_storage(v)
            out[v.name] = from_view(v, storages, v.nbytes)
        else:
            out[v.name] = from_view(v, storages, sizes[v.storage])
    source = layout.source or "Layout"
    if fmt.startswith("safetensors") or fmt == "folder":
        notes.append("safetensors file: checked as load_file would return it (every tensor its own storage)")
        layout = _layout_of(out, source)
    subject = Subject(source, layout, "layout", out, True)
    subject.has_meta_parameters = any(v.device == "meta" for v in layout.views)
    subject.notes.extend(notes)
    subject.notes.append("checked from a Layout: addresses are stand-ins, module facts (ties) unknown")
    return subject


def _own_storage(v: TensorView) -> TensorView:
    stride, acc = [], 1
    for size in reversed(v.shape):
        stride.append(acc)
        acc *= max(size, 1)
    return replace(
        v,
        storage=("cpu", f"loaded:{v.name}"),
        device="cpu",
        offset=0,
        start=0,
        stop=v.nbytes,
        stride=tuple(reversed(stride)),
        is_contiguous=True,
    )


def _layout_of(standins: dict[str, Any], source: str) -> Layout:
    """A layout built from stand-ins (their storages and geometry), for file-backed subjects."""
    views, infos = [], {}
    for name, s in standins.items():
        st = s.untyped_storage()
        key = ("cpu", st.key if not isinstance(st.key, tuple) else repr(st.key))
        infos[key] = StorageInfo(key, "cpu", st.nbytes())
        itemsize = s.element_size()
        start = s.storage_offset() * itemsize
        nbytes = s.nelement() * itemsize
        views.append(
            TensorView(
                name,
                key,
                "cpu",
                str(s.dtype)[6:],
                tuple(s.shape),
                s.stride(),
                s.storage_offset(),
                itemsize,
                start,
                start + nbytes if nbytes else start,
                nbytes,
                nbytes,
                True,
            )
        )
    return Layout(views, infos.values(), source=source)


def _optimized_module() -> type:
    """torch.compile's wrapper class (a class no object is an instance of when it is absent)."""
    mod = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(mod, "OptimizedModule", None) or type("NoOptimizedModule", (), {})


def _is_pretrained(obj: Any) -> bool:
    mod = sys.modules.get("transformers.modeling_utils")
    cls = getattr(mod, "PreTrainedModel", None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def versions() -> tuple[tuple[str, str], ...]:
    out = []
    for dist in ("torch", "safetensors", "transformers", "accelerate", "huggingface_hub"):
        ver = sv.installed(dist)
        if ver is not None:
            out.append((dist, ver))
    return tuple(out)


# -- step 2: one saver --------------------------------------------------------------------------------
def _not_run(rule: LibraryRule, s: Subject) -> str:
    """Why ``rule``'s saver cannot be run on ``s``, in words ("" when it can): its library is not
    installed (and what installs it), or it does not apply to this kind of object."""
    if not rule.applies(s):
        return f"it applies only to {rule.applies_to}"
    if not sv.installed(rule.library):
        extra = EXTRA_OF.get(rule.library)
        how = f"pip install 'tensorviz[{extra}]'" if extra else f"pip install {rule.library}"
        return f"{rule.library} is not installed: {how}"
    return ""


def _evaluate(saver: str, s: Subject) -> Verdict:
    """The verdict of one saver (its rule in :data:`~tensorviz.savecheck.savers.rules.SAVER_RULES`),
    asked once :func:`_not_run` found its library installed and the saver applicable."""
    rule = SAVER_RULES[saver]
    library, call = f"{rule.library} {sv.version(rule.library)}", rule.call_text(s)
    try:
        if s.key_problem and saver != "torch.save":
            raise sv.Unavailable(s.key_problem)
        run = rule.evaluate(s)
    except sv.Unavailable as e:
        return Verdict(
            saver,
            call,
            library,
            "could not evaluate",
            ("could not evaluate",),
            message=f"could not evaluate: {e}",
        )
    return _verdict(saver, call, library, run, s)


def _storage_of(s: Subject) -> dict[str, Any]:
    """Each name of the subject's layout -> its storage key (made once per check)."""
    if s.storage_of is None:
        t = getattr(s.layout, "_table", None)
        if t is not None:  # a view's storage is its table key: no record per view
            keys = t.keys
            s.storage_of = dict(zip(s.layout.names, map(keys.__getitem__, t.sidx.tolist())))
        else:
            s.storage_of = {v.name: v.storage for v in s.layout.views}
    return s.storage_of


def _pieces(s: Subject) -> dict[str, tuple[str, ...]]:
    """Each tensor subclass's name -> the layout's names of its inner tensors (made once per check)."""
    if s.pieces is None:
        s.pieces = pieces_of(s.layout)
    return s.pieces


def _given_layout(s: Subject, given: tuple[str, ...]) -> Layout:
    """The layout of the names a saver was given (a tensor subclass's name stands for its inner
    tensors): the subject's own when it is all of them, and built once per set of names (every
    saver of one check gets the same names: the last answer is kept with its names as given,
    so the next saver's are compared as a tuple, with no set of 100k names made)."""
    last = s.memo.get("given layout")
    if last is not None and last[0] is s.layout and last[1] == given:
        return last[2]
    sub = _layout_of_names(s, given)
    s.memo["given layout"] = (s.layout, given, sub)
    return sub


def _layout_of_names(s: Subject, given: tuple[str, ...]) -> Layout:
    key = frozenset(given)
    if key not in s.sub_layouts:
        pieces, layout = _pieces(s), s.layout
        if not pieces and len(key) == len(layout) and key == frozenset(layout.names):  # every name: no walk
            s.sub_layouts[key] = layout
            return layout
        names = [p for n in given for p in pieces.get(n, (n,)) if p in layout]
        whole = len(names) == len(layout)
        s.sub_layouts[key] = layout if whole else _sub(layout, names)
    return s.sub_layouts[key]


def _subclass_notes(saver: str, run: sv.Run, s: Subject) -> list[str]:
    """Why a saver refused a tensor subclass (its storage has no address), or how torch.save
    writes one (its inner tensors' storages, whole); the first subclass named."""
    if "subclasses" not in s.memo:  # the same stand-ins for every saver: looked for once
        s.memo["subclasses"] = [v for v in s.standins.values() if isinstance(v, SubclassStandIn)]
    subs = [v for v in s.memo["subclasses"] if v.name in run.given]
    if not subs:
        return []
    first, more = subs[0], f" (and {len(subs) - 1} more)" if len(subs) > 1 else ""
    inner = ", ".join(p[len(first.name) + 1 :] for p in first.pieces)
    if saver == "torch.save" and run.error is None:
        return [
            f"{first.name}{more} is a tensor subclass ({first.kind}): torch.save pickles it with its inner tensors ({inner}), "
            f"writing each inner tensor's storage once, whole; counted here under the names {first.pieces[0]}, …"
        ]
    said = storage_error(first)
    if run.error is None or not said or said not in run.error[1]:
        return []
    how = (
        "; torchao's flatten_tensor_state_dict (what transformers' save_pretrained uses for a torchao "
        "model) gives plain tensors safetensors can write"
        if first.library == "torchao"
        else ""
    )
    return [
        f"{first.name}{more} is a tensor subclass ({first.kind}): its values live in its inner tensors ({inner}) and the "
        f"subclass itself has no storage, so asking its address raises{how}"
    ]


def _broken_tie_loss(saver: str, run: sv.Run, s: Subject, sub: Layout) -> tuple[int, list[str]]:
    """Bytes a reload into the model's own class loses where the class ties names this model
    holds apart (``to_empty`` untied them): ``load_state_dict`` copies every name into the one
    shared tensor, so the last one's values stay and the others' are lost. Not for
    ``save_pretrained``: ``from_pretrained`` keeps a checkpoint's separate values (checked)."""
    ties = s.ties
    if ties is None or not ties.broken or run.error is not None or saver == "transformers.save_pretrained":
        return 0, []
    written = {acc.source_name(n, v)[0] for n, v in run.written.items()}
    lost, notes = 0, []
    for names in ties.broken:
        both = [n for n in names if n in written and n in sub]
        if len(both) < 2:
            continue
        nbytes = sum(sub[n].footprint_nbytes for n in both[:-1])
        lost += nbytes
        note = (
            f"reloading into {s.source} loses {format_bytes(nbytes)}: the class ties {', '.join(both)} "
            f"({ties.broken_source}), this model holds them apart (to_empty or a copy untied them), so "
            f"load_state_dict copies each into the one shared tensor and {both[-1]}'s values overwrite "
            f"the others'; tie them again before saving"
        )
        if saver == "safetensors.save_model":
            extra = ", ".join(f'"{n}"' for n in sorted(both)[1:])
            note += f"; load_model(model, path) then raises RuntimeError (Unexpected key(s) in state_dict: {extra})"
        notes.append(note)
    return lost, notes


def _verdict(saver: str, call: str, library: str, run: sv.Run, s: Subject) -> Verdict:
    sub = _given_layout(s, run.given)
    conj = _conjugates(saver, sub)
    kept, cloned, sources = acc.written_names(run, _storage_of(s), _pieces(s), conj)
    b = acc.byte_counts(saver, run, sub, sources)
    reload_lost, reload_notes = _broken_tie_loss(saver, run, s, sub)
    b.lost += reload_lost
    run.notes.extend(reload_notes)
    unknown = acc.unlaid(saver, run)  # torch.save also writes tensors tensorviz does not lay out
    if unknown:
        run.notes.append(acc.UNKNOWN_WRITTEN.format(names=", ".join(unknown[:3])))
    run.notes.extend(_subclass_notes(saver, run, s))
    written_conj = [n for n in run.written if n in conj]
    if written_conj and run.error is None:
        run.notes.append(
            f"{', '.join(written_conj[:3])}{' and more' if len(written_conj) > 3 else ''}: a conjugate view "
            f"(z.conj()): the file gets its storage's bytes, the values unconjugated, and loads them as "
            f"plain values, so it comes back conjugated; write z.conj().resolve_conj() (a copy) instead"
        )
    bounds = acc.inexact_names(sub)  # figures only bounds: no outcome from them, and a note says so
    problems = acc.problems(run, b, inexact=bool(bounds))
    notes = list(run.notes) + ([acc.INEXACT.format(names=", ".join(bounds[:3]))] if bounds else [])
    if run.error is None and any(st.device == "meta" for st in sub.storages):
        notes.append("meta tensors carry no data: only their shapes are saved")
    if saver == "torch.save" and b.duplicated:
        notes.append(
            "some memory is read through several storage objects (from_numpy/frombuffer twice, set_ on a "
            "slice): torch.save writes each object whole, and after loading they no longer share memory"
        )
    if saver == "torch.save" and b.unreferenced and run.error is None:
        notes.extend(kept_alive_lines(sub))  # what each slice keeps alive, and what .clone() would hold
    return Verdict(
        saver=saver,
        call=call,
        library=library,
        outcome=problems[0] if problems else "ok",
        problems=tuple(problems),
        error_type=run.error[0] if run.error else "",
        message=run.error[1] if run.error else "",
        kept=tuple(kept),
        dropped=tuple(run.dropped),
        renamed=tuple(run.renamed),
        ignored=tuple(run.ignored),
        cloned=tuple(cloned),
        written_nbytes=None if unknown else b.written,
        file_nbytes=acc.file_nbytes(run),
        unique_nbytes=acc.unique_nbytes(sub),
        lost_nbytes=b.lost,
        duplicated_nbytes=b.duplicated,
        unreferenced_nbytes=b.unreferenced,
        anchor=_anchor_groups(run, s),
        anchor_name=run.anchor_name,
        misfires=tuple(_misfires(run, sub, s)),
        logs=tuple(run.logs),
        notes=tuple(notes),
    )


def _conjugates(saver: str, sub: Layout) -> frozenset[str]:
    """The given names that are conjugate views, where the saver writes raw bytes (all but
    torch.save, which pickles the conj bit): their values do not come back."""
    return frozenset() if saver == "torch.save" else acc.conjugate_names(sub)


def _anchor_groups(run: sv.Run, s: Subject) -> tuple[tuple[str, ...], ...] | None:
    """The groups of two or more names the library's sharing check reported, each sorted: once
    per answer (the savers handed the same tensors share the library's one answer)."""
    if run.anchor is None:
        return None
    key = ("anchor groups", id(run.anchor))
    if key not in s.memo:  # the entry keeps the answer alive: its id is not reused during the check
        s.memo[key] = (tuple(tuple(sorted(g)) for g in run.anchor if len(g) > 1), run.anchor)
    return s.memo[key][0]
