"""The save check's steps: collect facts up front, ask each saver, read the bytes exactly.

Step 1 (:func:`_subject`) turns the object into a layout, a ``{name: StandIn}`` state dict as
each saver would receive it, and the module-only facts (ties, meta parameters) -- after which
no tensor or module is referenced. Step 2 runs each saver's evaluation
(:mod:`tensorviz._savers`). Step 3 (:func:`_verdict`) accounts bytes from the layout's exact
footprints, lists misfires, and asks :mod:`tensorviz._save_plan` for fixes.

Imported only from inside :func:`tensorviz.savecheck.report.save_check` (it imports torch at the top).
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from tensorviz.core import footprint as fp
from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo, TensorView
from tensorviz.savecheck import savers as sv
from tensorviz.savecheck import savers_hf as hf
from tensorviz.savecheck.misfires import misfires as _misfires
from tensorviz.savecheck.misfires import sub_layout as _sub
from tensorviz.savecheck.outcomes import OUTCOMES, SAVERS
from tensorviz.savecheck.standin import StandIn, from_tensor, from_view
from tensorviz.savecheck.verdicts import SaveReport, Verdict

__all__ = ["run_check", "Subject"]


@dataclass
class Subject:
    """Everything the check needs, gathered once; holds stand-ins, never tensors."""

    source: str
    layout: Layout
    kind: str  # "module" | "mapping" | "layout"
    standins: dict[str, Any]
    ordered: bool
    real_state_dict: Any = None  # only used by torch.save's own dry run, dropped after it
    pretrained: Any = None  # the transformers model, only while its verdict is computed
    has_meta_parameters: bool = False
    ties: Any = None
    notes: list[str] = field(default_factory=list)


def run_check(obj: Any, wanted: tuple[str, ...]) -> SaveReport:
    subject = _subject(obj)
    verdicts = []
    for saver in wanted:
        v = _evaluate(saver, subject)
        if v is not None:
            verdicts.append(v)
    subject.real_state_dict = subject.pretrained = None
    from tensorviz.savecheck.fixes import attach_fixes

    verdicts = attach_fixes(verdicts, subject)
    return SaveReport(
        source=subject.source,
        verdicts=tuple(verdicts),
        versions=_versions(),
        unique_nbytes=_unique(subject.layout),
        ties=subject.ties,
        notes=tuple(subject.notes),
    )


# -- step 1: the subject ----------------------------------------------------------------------------
def _subject(obj: Any) -> Subject:
    if isinstance(obj, (str, os.PathLike)):
        from tensorviz.sources import analyze

        obj = analyze(obj)
    if isinstance(obj, Layout):
        return _layout_subject(obj)
    from tensorviz.sources.live import analyze_object

    layout = analyze_object(obj)
    if isinstance(obj, torch.nn.Module):
        sd = obj.state_dict()
        subject = Subject(type(obj).__qualname__, layout, "module", _standins(sd), True, real_state_dict=sd)
        subject.has_meta_parameters = any(p.device.type == "meta" for p in obj.parameters())
        from tensorviz.savecheck.ties import module_ties

        subject.ties = module_ties(obj, layout)
        if _is_pretrained(obj):
            subject.pretrained = obj
        return subject
    if isinstance(obj, Mapping):
        ordered = isinstance(obj, collections.OrderedDict)
        return Subject(type(obj).__qualname__, layout, "mapping", _standins(obj), ordered, real_state_dict=obj)
    # a tensor or a sequence: the names tensorviz gives them, as a plain dict
    from tensorviz.sources.live import iter_named_values

    sd = dict(iter_named_values(obj))
    subject = Subject(type(obj).__qualname__, layout, "mapping", _standins(sd), False, real_state_dict=sd)
    subject.notes.append("not a mapping: checked as the dict {name: tensor} with tensorviz's names")
    return subject


def _standins(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Stand-ins for plain strided tensors; anything else is passed to the savers as it is, so
    they reject it with their own message."""
    from tensorviz.sources.live import why_not_analysable

    storages: dict = {}
    out: dict[str, Any] = {}
    for name, value in sd.items():
        if isinstance(value, torch.Tensor) and why_not_analysable(value) is None:
            out[name] = from_tensor(name, value, storages)
        else:
            out[name] = value
    return out


def _layout_subject(layout: Layout) -> Subject:
    fmt = str(layout.metadata.get("format", ""))
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


def _is_pretrained(obj: Any) -> bool:
    mod = sys.modules.get("transformers.modeling_utils")
    cls = getattr(mod, "PreTrainedModel", None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def _versions() -> tuple[tuple[str, str], ...]:
    out = []
    for dist in ("torch", "safetensors", "transformers", "accelerate", "huggingface_hub"):
        ver = sv.version(dist)
        if ver is not None:
            out.append((dist, ver))
    return tuple(out)


# -- step 2: one saver --------------------------------------------------------------------------------
def _library(saver: str) -> str:
    dist = {
        "safetensors.save_file": "safetensors",
        "safetensors.save_model": "safetensors",
        "torch.save": "torch",
        "transformers.save_pretrained": "transformers",
        "accelerate.save": "accelerate",
        "Accelerator.save_model": "accelerate",
    }[saver]
    ver = sv.version(dist)
    return f"{dist} {ver}" if ver else ""


def _call(saver: str, subject: Subject) -> str:
    model = "model"
    sd = "model.state_dict()" if subject.kind == "module" else "state_dict"
    call = SAVERS[saver].format(sd=sd, model=model)
    if saver == "safetensors.save_model" and subject.kind != "module":
        call += "  # a module whose state_dict() is this mapping"
    if saver == "accelerate.save" and subject.kind == "mapping" and not subject.ordered:
        call += "  # a plain dict: accelerate does not de-duplicate it"
    return call


def _evaluate(saver: str, s: Subject) -> Verdict | None:
    library = _library(saver)
    if not library:
        return None  # not installed
    sd = s.standins
    try:
        if saver == "safetensors.save_file":
            run = sv.evaluate_save_file(sd)
        elif saver == "safetensors.save_model":
            run = sv.evaluate_save_model(sd)
        elif saver == "torch.save":
            run = sv.evaluate_torch_save(sd, s.real_state_dict)
        elif saver == "transformers.save_pretrained":
            if s.pretrained is None:
                return None
            run = hf.evaluate_save_pretrained(s.pretrained, sd)
        elif saver == "accelerate.save":
            run = hf.evaluate_accelerate_save(sd, s.ordered)
        else:
            if s.kind != "module":
                return None
            run = hf.evaluate_accelerator_save_model(sd, s.has_meta_parameters)
    except sv.Unavailable as e:
        return Verdict(
            saver,
            _call(saver, s),
            library,
            "could not evaluate",
            ("could not evaluate",),
            message=f"could not evaluate: {e}",
        )
    return _verdict(saver, _call(saver, s), library, run, s)


# -- step 3: exact bytes ---------------------------------------------------------------------------------
def _unique(layout: Layout) -> int:
    """Distinct bytes the layout's views read, leaving out meta storages (they hold no data)."""
    return sum(st.covered_nbytes for st in layout.storages if st.device != "meta")


def _source_name(name: str, value: Any) -> tuple[str, bool]:
    """The given name a written stand-in reads from, and whether it is written as a copy."""
    src = getattr(value, "source", name)
    if src.startswith("copy of "):
        return src[len("copy of ") :], True
    return src, False


@dataclass
class _Bytes:
    written: int = 0
    distinct: int = 0
    lost: int = 0
    unreferenced: int = 0

    @property
    def duplicated(self) -> int:
        return max(self.written - self.distinct, 0)


def _written(run: sv.Run, layout: Layout) -> tuple[list[str], list[str], dict[Any, list[str]]]:
    """Names written, names written as copies, and per storage the given names they read from."""
    kept, cloned, sources = [], [], collections.defaultdict(list)
    for name, value in run.written.items():
        src, copied = _source_name(name, value)
        kept.append(name)
        if copied:
            cloned.append(name)
        if src in layout:
            sources[layout[src].storage].append(src)
    return kept, cloned, sources


def _bytes(saver: str, run: sv.Run, sub: Layout, sources: dict[Any, list[str]]) -> _Bytes:
    """Exact byte accounting from footprints (meta storages hold no data and count nothing)."""
    b = _Bytes()
    if run.error is not None:
        return b
    live = [st for st in sub.storages if st.device != "meta"]
    if saver == "torch.save":  # whole storages, once each
        b.written = sum(st.nbytes for st in live)
        b.unreferenced = sum(st.unreferenced_nbytes for st in live)
    else:
        b.written = sum(_nbytes(v) for v in run.written.values())
    for st in live:
        every = fp.union(*[sub.footprint_runs(n) for n in st.names])
        kept = fp.union(*[sub.footprint_runs(n) for n in sources.get(st.key, ())])
        b.lost += fp.total(every) - fp.total(kept)
        b.distinct += fp.total(kept)
    b.lost += _unrestored_nbytes(run, sub)
    if saver == "torch.save":
        b.distinct = b.written
    return b


def _problems(run: sv.Run, b: _Bytes) -> list[str]:
    flags = [
        ("raises", run.error is not None),
        ("drops data", b.lost),
        ("duplicates bytes", b.duplicated),
        ("writes unreferenced bytes", b.unreferenced),
    ]
    return sorted((label for label, on in flags if on), key=OUTCOMES.index)


def _verdict(saver: str, call: str, library: str, run: sv.Run, s: Subject) -> Verdict:
    sub = _sub(s.layout, [n for n in run.given if n in s.layout])
    kept, cloned, sources = _written(run, s.layout)
    b = _bytes(saver, run, sub, sources)
    problems = _problems(run, b)
    notes = list(run.notes)
    if run.error is None and any(st.device == "meta" for st in sub.storages):
        notes.append("meta tensors carry no data: only their shapes are saved")
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
        cloned=tuple(cloned),
        written_nbytes=b.written,
        file_nbytes=_file_nbytes(run),
        unique_nbytes=_unique(sub),
        lost_nbytes=b.lost,
        duplicated_nbytes=b.duplicated,
        unreferenced_nbytes=b.unreferenced,
        anchor=None if run.anchor is None else tuple(tuple(sorted(g)) for g in run.anchor if len(g) > 1),
        anchor_name=run.anchor_name,
        misfires=tuple(_misfires(run, sub, s)),
        logs=tuple(run.logs),
        notes=tuple(notes),
    )


def _nbytes(v: Any) -> int:
    return v.nelement() * v.element_size() if isinstance(v, StandIn) else 0


def _unrestored_nbytes(run: sv.Run, sub: Layout) -> int:
    """transformers: dropped names from_pretrained will not re-tie come back as fresh weights."""
    names = [n for n in run.dropped if any(n in note and "will not restore" in note for note in run.notes)]
    return sum(sub[n].footprint_nbytes for n in names if n in sub)


def _file_nbytes(run: sv.Run) -> int | None:
    if run.error is not None:
        return None
    if run.file_nbytes is not None:
        return run.file_nbytes
    if not run.files:
        return None
    sizes = [sv.safetensors_file_nbytes(t, md) for _, t, md in run.files]
    return None if any(x is None for x in sizes) else sum(sizes)
