"""Meta tensors checked as if materialised: one note at the top, sharing verdicts as for real data.

A model built on ``torch.device("meta")`` holds no data, so every saver but ``torch.save`` would
refuse it ("Cannot copy out of meta tensor"), which says nothing about the question a user asks
of it: *once it has weights, what will each saver do with its ties and views?* So the check
replays the savers on the model as if materialised on CPU with the same storage sharing (what
``model.to_empty(device="cpu")`` followed by transformers' ``model.tie_weights()`` gives: on
torch 2.13 ``to_empty`` alone gives tied parameters separate storages, untying them): each meta storage becomes one pretend CPU storage with its own address, its
views keep their offsets, and the report says once, at the top, what was assumed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from tensorviz.core.layout import Layout
from tensorviz.core.records import StorageInfo
from tensorviz.savecheck.standin import StandIn, StorageStandIn, fresh_ptr
from tensorviz.savecheck.subject import Subject

__all__ = ["META_NOTE", "as_materialised", "has_meta"]

META_NOTE = (
    "meta tensors hold no data: every verdict below is for this model as if materialised on CPU with "
    "the same storage sharing (e.g. model.to_empty(device='cpu') then model.tie_weights(): to_empty alone "
    "unties tied weights). Saving the meta "
    "tensors themselves raises 'Cannot copy out of meta tensor' in every saver but torch.save (which "
    "writes their shapes only), and Accelerator.save_model refuses meta parameters"
)

_CPU = torch.device("cpu")


def has_meta(layout: Layout) -> bool:
    """Whether any storage of ``layout`` is on the meta device."""
    return any(st.device == "meta" for st in layout.storages)


def _cpu_key(key: tuple) -> tuple:
    """The storage key a meta storage gets once materialised (never a real CPU storage's key)."""
    return ("cpu", f"materialised {key[0]}:{key[1]}")


def _layout(layout: Layout) -> Layout:
    """``layout`` with every meta storage as a CPU storage of the same size and views."""
    infos = []
    for st in layout.storages:
        key, device = (_cpu_key(st.key), "cpu") if st.device == "meta" else (st.key, st.device)
        infos.append(StorageInfo(key, device, st.nbytes, st.label))
    views = [replace(v, storage=_cpu_key(v.storage), device="cpu") if v.device == "meta" else v for v in layout.views]
    return Layout(views, infos, layout.skipped, source=layout.source, metadata=layout.metadata)


def _standins(standins: dict[str, Any]) -> dict[str, Any]:
    """Stand-ins on meta storages moved to one fresh pretend CPU storage per meta storage."""
    moved: dict[int, StorageStandIn] = {}
    out: dict[str, Any] = {}
    for name, s in standins.items():
        if not isinstance(s, StandIn) or s.device.type != "meta":
            out[name] = s
            continue
        old = s.untyped_storage()
        new = moved.get(id(old))
        if new is None:
            nbytes = old.nbytes()
            new = moved[id(old)] = StorageStandIn(
                fresh_ptr() if nbytes else 0, nbytes, _CPU, _cpu_key(("meta", id(old)))
            )
        out[name] = StandIn(s.dtype, _CPU, tuple(s.shape), s.stride(), s.storage_offset(), new, s.source)
    return out


def as_materialised(subject: Subject) -> None:
    """Turn a subject with meta storages into the same subject as if materialised (in place)."""
    subject.layout = _layout(subject.layout)
    subject.standins = _standins(subject.standins)
    # torch.save by its rules on the stand-ins: torch's dry run of meta tensors writes empty
    # records, so the materialised file's size is left unknown (the verdict says so)
    subject.real_state_dict = None
    subject.has_meta_parameters = False
    subject.storage_of = None
    subject.sub_layouts.clear()
    subject.materialised = True
    subject.notes.insert(0, META_NOTE)
