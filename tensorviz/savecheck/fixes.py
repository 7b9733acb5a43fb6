"""Fixes: code that makes a state dict every saver accepts, and code that restores it on load.

The plan works per storage, from exact footprints:

* a storage with a *complete* view (contiguous, reads every byte, no expansion) keeps that
  view; every other view of it is dropped before saving and rebuilt after loading as a view of
  the kept tensor (``_view_of``: same dtype, shape, stride and byte offset);
* otherwise each view is written as its own compact copy: ``.clone()`` (only the bytes it
  reads), ``.clone(memory_format=torch.contiguous_format)`` for a non-contiguous view, or, for
  an expanded view, one copy of the expanded data that is re-``expand``-ed after loading.

``mode="clone"`` (transformers) copies instead of dropping, so every name stays in the file;
``mode="torch"`` only copies what ``torch.save`` mishandles (partial views of a storage, a second
dtype on one storage). The test-suite executes every fix and checks a bit-exact round trip.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from tensorviz.core.layout import Layout
from tensorviz.core.records import CONJ_NOTE, TensorView
from tensorviz.core.relations import record_relation
from tensorviz.core.units import format_bytes
from tensorviz.savecheck.accounting import conjugate_names
from tensorviz.savecheck.loops import fold_statements, instance, loop_values
from tensorviz.savecheck.standin import StandIn
from tensorviz.savecheck.verdicts import Fix, Verdict

__all__ = ["attach_fixes", "plan_lines", "fix_title"]

_HELPER = '''def _view_of(base, dtype, shape, stride, offset):
    """A view of the bytes of contiguous `base`, as dtype/shape/stride from element `offset`."""
    flat = base.reshape(-1).view(dtype)
    return flat.as_strided(shape, stride, flat.storage_offset() + offset)
'''

_SAVE = {
    "safetensors.save_file": ("from safetensors.torch import save_file", "save_file(fixed, path)"),
    "safetensors.save_model": ("from safetensors.torch import save_file", "save_file(fixed, path)"),
    "torch.save": ("", "torch.save(fixed, path)"),
    "accelerate.save": (
        "from collections import OrderedDict\nfrom accelerate.utils import save",
        "save(OrderedDict(fixed), path, safe_serialization=True)",
    ),
    "Accelerator.save_model": (
        "from accelerate import Accelerator",
        "Accelerator().save(fixed, path, safe_serialization=True)",
    ),
    "transformers.save_pretrained": ("", "model.save_pretrained(path, state_dict=fixed)"),
}
_LOAD = {
    "torch.save": "state_dict = torch.load(path, weights_only=True)",
    "transformers.save_pretrained": "model = type(model).from_pretrained(path)\nstate_dict = model.state_dict()",
}
_LOAD_SAFETENSORS = "from safetensors.torch import load_file\nstate_dict = dict(load_file(path))"


def attach_fixes(verdicts: list[Verdict], subject: Any) -> list[Verdict]:
    """Each verdict with a problem gets its fixes (and a note where no code can help)."""
    by = {v.saver: v for v in verdicts}
    out = []
    for v in verdicts:
        if v.outcome in ("ok", "could not evaluate"):
            out.append(v)
            continue
        fixes, notes = _fixes(v, subject, by)
        out.append(replace(v, fixes=tuple(fixes), notes=v.notes + tuple(notes)))
    return out


def _fixes(v: Verdict, s: Any, by: dict[str, Verdict]) -> tuple[list[Fix], list[str]]:
    layout: Layout = s.layout
    given, meta, freed = _facts(s)
    if meta:
        return [], [
            "no code can save meta tensors: they have no data. Materialise first "
            "(model.to_empty(device='cpu') then load or initialise real weights), then check again"
        ]
    if v.saver not in _SAVE:
        return [], [f"tensorviz has no code fix for {v.saver}"]
    if freed:
        return [], [
            f"no code can save {_few(freed)}: their storage was freed (resize_), the bytes are gone. "
            f"Save while the storage still holds them (FSDP: from a full state dict, e.g. "
            f"torch.distributed.checkpoint.state_dict.get_model_state_dict), then check again"
        ]
    problem = _problem(v)
    fixes = []
    if v.saver == "safetensors.save_file" and s.kind == "module":
        sm = by.get("safetensors.save_model")
        if sm is not None and sm.ok:
            fixes.append(
                Fix(
                    problem,
                    "from safetensors.torch import save_model\nsave_model(model, path)",
                    "from safetensors.torch import load_model\nload_model(model, path)\n"
                    "state_dict = model.state_dict()",
                    note=f"save_model writes each storage once and records the "
                    f"{len(sm.dropped)} dropped alias(es); load_model restores them",
                    title="use save_model(model, path); load_model(model, path) restores the aliases",
                )
            )
    mode = {"transformers.save_pretrained": "clone", "torch.save": "torch"}.get(v.saver, "single")
    key = ("fix plan", tuple(given), mode)  # savers given the same names share one plan
    if key not in s.memo:
        s.memo[key] = plan_lines(layout, given, _contiguity(s), mode)
    save_lines, load_lines, cost = s.memo[key]
    if not save_lines and not fixes:
        return [], ["tensorviz has no code fix for this case"]
    if save_lines:
        if ("text", key) not in s.memo:  # the plan's text, made once for every saver it serves
            s.memo["text", key] = _plan_text(save_lines, load_lines)
        fixes.append(_plan_fix(v, s, problem, cost, s.memo["text", key]))
    return fixes, []


def _facts(s: Any) -> tuple[list[str], bool, list[str]]:
    """The names given that the layout knows, whether one is on meta, the names whose storage
    was freed: the same for every verdict of one check, so found once (``s.memo``)."""
    if "fix facts" not in s.memo:
        layout = s.layout
        known = set(layout.names)  # one set, not a layout lookup per name
        given = [n for n in s.standins if n in known]
        # a view's device is its storage's: with no storage on meta, no record per name is needed
        on_meta = any(st.device == "meta" for st in layout.storages)
        meta = on_meta and any(layout[n].device == "meta" for n in given)
        freed = [n for n, t in s.standins.items() if isinstance(t, StandIn) and t.is_freed()]
        s.memo["fix facts"] = (given, meta, freed)
    return s.memo["fix facts"]


def _contiguity(s: Any) -> dict[str, bool]:
    if "contiguity" not in s.memo:
        s.memo["contiguity"] = {n: t.is_contiguous() for n, t in s.standins.items() if isinstance(t, StandIn)}
    return s.memo["contiguity"]


def _problem(v: Verdict) -> str:
    if v.error_type:
        return f"{v.saver} raises {v.error_type}: {_first_sentence(v.message)}"
    parts = []
    if v.lost_nbytes:
        parts.append(f"loses {format_bytes(v.lost_nbytes)} (drops {', '.join(v.dropped)})")
    if v.duplicated_nbytes:
        parts.append(f"writes {format_bytes(v.duplicated_nbytes)} twice")
    if v.unreferenced_nbytes:
        parts.append(f"writes {format_bytes(v.unreferenced_nbytes)} that no tensor reads")
    return f"{v.saver} " + "; ".join(parts)


def _first_sentence(message: str, head: int = 4096) -> str:
    """The message's first sentence, whitespace collapsed, cut to 140 characters. Read from its
    first ``head`` characters where they settle it (safetensors' message lists every shared
    name: 1.5 MB at 100k views); collapsing a prefix gives a prefix of the whole collapsed."""
    if len(message) > head:
        part = " ".join(message[:head].split())
        end = part.find(". ")
        if end >= 0:  # the first ". " of the whole lies in the prefix
            return _cut(part[:end].rstrip("."))
        if len(first := part.rstrip(".")) > 140:  # the sentence runs on past 140 characters
            return _cut(first)
    return _cut(" ".join(message.split()).split(". ")[0].rstrip("."))


def _cut(first: str) -> str:
    return first[:139] + "…" if len(first) > 140 else first


class _PlanText(NamedTuple):
    """A plan's lines as text, made once for every saver the plan serves."""

    save: str  # the save lines, one a line
    load: tuple[str, ...]  # the load lines, joined (none when there are none)
    steps: _Reading  # what the save lines do (for the title)
    tidy: bool  # no empty line among the save lines: tidying the code leaves them as they are
    helper: bool  # a load line calls _view_of


def _plan_text(save_lines: list[str], load_lines: list[str]) -> _PlanText:
    """The plan's code (statements repeated over layers written as loops: :mod:`.loops`) and
    its steps, read from the statements one by one."""
    block = "\n".join(fold_statements(save_lines))
    tidy = bool(block) and "\n\n" not in block and not block.startswith("\n") and not block.endswith("\n")
    load = ("\n".join(fold_statements(load_lines)),) if load_lines else ()
    helper = any("_view_of(" in line for line in load_lines)
    return _PlanText(block, load, _Reading().read(block.splitlines()), tidy, helper)


def _plan_fix(v: Verdict, s: Any, problem: str, cost: str, text: _PlanText) -> Fix:
    """The fix for one saver from a plan's text (:func:`_plan_text`) and its note (``cost``)."""
    imports, call = _SAVE[v.saver]
    base = "model.state_dict()" if s.kind == "module" else "state_dict"
    head = "\n".join(["import torch", imports, "", f"fixed = dict({base})"])
    if text.tidy:  # only the head and call can hold empty lines to fold: the plan's are left as they are
        save = "\n".join([_tidy(head), text.save, _tidy(call)])
    else:
        save = _tidy("\n".join([head, text.save, call]))
    load_head = _LOAD.get(v.saver, _LOAD_SAFETENSORS)
    load = "\n".join(["import torch", load_head, *([_HELPER] if text.helper else []), *text.load])
    if s.kind == "module" and v.saver != "transformers.save_pretrained":
        load += "\nmodel.load_state_dict(state_dict)"
    if v.saver == "safetensors.save_model":
        cost = "; ".join(
            x for x in ("save_model refuses this model as it is: the prepared dict goes to save_file", cost) if x
        )
    path = {"torch.save": "model.pt", "transformers.save_pretrained": "saved_model"}.get(v.saver, "model.safetensors")
    return Fix(problem, save, load, note=cost, path=path, title=_title(save, head, text.steps, call))


def _title(save: str, head: str, steps: _Reading, call: str) -> str:
    """:func:`fix_title` of ``save`` (``head``, the plan's lines, ``call``, tidied), the plan's
    lines read once (``steps``): tidying drops only empty lines, which say nothing."""
    if steps.stateful:  # an import or a call among the plan's lines: read the code in full
        return fix_title(save)
    return _Reading().read(head.splitlines()).add(steps).read(call.splitlines()).title()


def fix_title(save_code: str) -> str:
    r"""What a fix's code does, in a few words, read from the code itself (so it cannot drift).

    The code is tensorviz's own (one statement a line, names written with ``repr``), read line
    by line with regular expressions: no ``ast.parse``, whose C state CPython 3.11 shares between
    threads (python/cpython#106905: another thread parsing at the same moment could fail).

    >>> fix_title("fixed = dict(sd)\ndel fixed['v']\nfixed['w'] = fixed['w'].clone()\nsave_file(fixed, path)")
    'leave out v (rebuilt after loading); write w as its own copy; then save_file'
    """
    return _Reading().read(save_code.splitlines()).title()


class _Reading:
    """What :func:`fix_title` has read so far: per kind of step, the first matches (names are
    unquoted only for the few the title shows) and how many; the save call; imported names.

    A plan's lines are read once (then :meth:`add`-ed) for every saver's code that holds them: the
    title of ``head + plan + tail`` is that of reading the three in turn, since a plan's lines
    only add steps (a block holding an import or a call is not summed up: read in full)."""

    __slots__ = ("steps", "counts", "call", "origin", "stateful")

    def __init__(self) -> None:
        self.steps: dict[str, list[re.Match]] = {"dropped": [], "copied": [], "expanded": []}
        self.counts = dict.fromkeys(self.steps, 0)
        self.call, self.stateful = "", False
        self.origin: dict[str, str] = {}

    def read(self, lines: Iterable[str]) -> _Reading:
        lines = list(lines)
        k = 0
        while k < len(lines):
            line = lines[k]
            if line.startswith("for i in "):  # a loop of the plan's statements (tensorviz.savecheck.loops)
                k = self._loop(lines, k)
                continue
            if line.startswith("from ") and (m := _IMPORT(line)):  # each pattern starts with its own words
                self.stateful = True
                for part in m.group(2).split(","):
                    name, _, alias = part.strip().partition(" as ")
                    self.origin[alias or name] = f"{m.group(1)}.{name}"
            elif (step := _step_of(line)) is not None:
                self._step(*step)
            elif (func := _call(line)) is not None:
                self.stateful = True
                self.call = self.origin.get(func, func) if func == "save" else func  # a bare save(): say whose
            k += 1
        return self

    def _loop(self, lines: list[str], k: int) -> int:
        """Read the loop whose head starts at line ``k`` as it runs (each number, then each
        statement), counting each statement once per number; the line after it."""
        head = lines[k]
        while not head.endswith(":") and k + 1 < len(lines):  # a wrapped literal
            k += 1
            head += " " + lines[k].strip()
        body = []
        while k + 1 < len(lines) and lines[k + 1].startswith("    "):
            k += 1
            body.append(lines[k])
        values = loop_values(head)
        if not values:  # no loop tensorviz writes: read in full elsewhere
            self.stateful = True
            return k + 1
        kinds = [step[0] if (step := _step_of(instance(b, values[0]))) else None for b in body]
        for i in values:
            if all(len(self.steps[kind]) >= _SHOWN for kind in kinds if kind):
                break
            for b, kind in zip(body, kinds):
                if kind and len(self.steps[kind]) < _SHOWN:
                    self.steps[kind].append(_step_of(instance(b, i))[1])  # type: ignore[index]
        for kind in kinds:
            if kind:
                self.counts[kind] += len(values)
        return k + 1

    def _step(self, kind: str, m: re.Match) -> None:
        self.counts[kind] += 1
        if len(self.steps[kind]) < _SHOWN:
            self.steps[kind].append(m)

    def add(self, block: _Reading) -> _Reading:
        """Add the steps of a block read alone (one with no import or call: see :attr:`stateful`)."""
        assert not block.stateful, "a block with an import or a call is read in full"
        for kind, matches in block.steps.items():
            self.counts[kind] += block.counts[kind]
            self.steps[kind] = (self.steps[kind] + matches)[:_SHOWN]
        return self

    def title(self) -> str:
        parts, counts = [], self.counts
        if counts["dropped"]:
            parts.append(f"leave out {self._few('dropped')} (rebuilt after loading)")
        if counts["copied"]:
            own = "its own copy" if counts["copied"] == 1 else "their own copies"
            parts.append(f"write {self._few('copied')} as {own}")
        if counts["expanded"]:
            parts.append(f"write {self._few('expanded')} un-expanded (expanded again after loading)")
        return "; ".join(parts + ([f"then {self.call}"] if self.call else []))

    def _few(self, kind: str) -> str:
        """:func:`_few` of the names the first matches quote (group 1, a ``repr``)."""
        more = [""] * max(self.counts[kind] - _SHOWN, 0)
        return _few([_unrepr(m.group(1)) for m in self.steps[kind]] + more, _SHOWN)


#: Names a title shows per kind of step.
_SHOWN = 3


# A quoted literal as an unrolled loop (``[^'\\]*`` runs as one greedy step): matching stays fast
# on a line holding a 1 MB name, where a per-character alternation took milliseconds a match.
_LIT = r"""('[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")"""
_IMPORT = re.compile(r"^from ([\w.]+) import (.+)$").match
_DELETE = re.compile(rf"^del fixed\[{_LIT}\]").match
_ASSIGN = re.compile(rf"^fixed\[{_LIT}\] = fixed\[{_LIT}\](\[[^\]]*\])?\.clone\(").match
_CALL = re.compile(r"^[A-Za-z_][\w.]*(\(\))?(\.[A-Za-z_]\w*)*\(.*\)$").match


def _step_of(line: str) -> tuple[str, re.Match] | None:
    """``(kind of step, its match)`` of a plan's statement: a name left out or copied."""
    if line.startswith("del fixed[") and (m := _DELETE(line)):
        return "dropped", m
    if line.startswith("fixed[") and (m := _ASSIGN(line)):
        return ("expanded" if m.group(3) else "copied"), m
    return None


def _unrepr(literal: str) -> str:
    """The str whose ``repr`` is ``literal`` (quotes and backslash escapes undone)."""
    body = literal[1:-1]
    if "\\" not in body:
        return body
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _call(line: str) -> str | None:
    """``f`` for a line that is the call statement ``f(...)`` (a trailing comment allowed)."""
    code = line.split("  #", 1)[0].rstrip()
    if code.startswith("fixed") or not _CALL(code):
        return None
    depth = 0
    for i in range(len(code) - 1, -1, -1):  # the "(" that opens the final argument list
        depth += {")": 1, "(": -1}.get(code[i], 0)
        if depth == 0:
            return code[:i]
    return None


def _few(names: list[str], limit: int = 3) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _tidy(code: str) -> str:
    out: list[str] = []
    lines = code.split("\n")
    for ln in lines:
        if ln == "" and out and out[-1] == "":
            continue
        out.append(ln)
    return "\n".join(out)


# -- the plan ---------------------------------------------------------------------------------------
def plan_lines(
    layout: Layout, names: list[str], contiguous: dict[str, bool], mode: str
) -> tuple[list[str], list[str], str]:
    """Save-side lines (editing ``fixed``), load-side lines (editing ``state_dict``), and a note."""
    save: list[str] = []
    load: list[str] = []
    dup = 0
    # Conjugate views (z.conj()): a raw-bytes saver would write their values unconjugated, so
    # none is kept as it is; each is rebuilt from a plain keeper with .conj(), or copied.
    conj = frozenset() if mode == "torch" else conjugate_names(layout)
    members = [(layout.storage(s), group, at) for s, group, at in _storage_members(layout, names)]
    keeps = [None if mode == "torch" else _keeper(layout, st, group, contiguous, conj) for st, group, _ in members]
    _made_if_most(
        layout, [g for (_, g, _), k in zip(members, keeps) if mode == "torch" or (k is not None and len(g) > 1)]
    )
    for (st, group, at), keep in zip(members, keeps):
        if mode == "torch":
            _torch_steps(st, list(map(layout.__getitem__, group)), contiguous, save, load)
            continue
        if keep is not None and (len(group) > 1):
            for v in map(layout.__getitem__, group):
                if v.name == keep.name:
                    continue
                if mode == "clone":
                    save.append(_clone_line(v, contiguous, f"shares {keep.name}'s storage: its own copy"))
                else:
                    save.append(f"del fixed[{v.name!r}]  # {_why_drop(layout, v, keep)}: rebuilt after loading")
                    load.append(f"state_dict[{v.name!r}] = {_restore(v, keep)}{'.conj()' * (v.name in conj)}")
        elif keep is None:
            if mode == "clone" and len(group) == 1 and group[0] not in conj:
                continue  # one name on its storage: transformers writes it as it is
            copies = _copied(layout, group, at)
            dup += _overlap_bytes(layout, group, st, copies)
            for c in copies:
                if c.name in conj:  # a copy holds the values (clone resolves the conj bit)
                    save.append(_clone_line(c, contiguous, "a conjugate view: a copy holds its values"))
                else:
                    _copy_steps(c, st.nbytes, contiguous, save, load)
    note = f"the copies overlap: {format_bytes(dup)} written twice" if dup else ""
    return save, load, note


def _storage_members(layout: Layout, names: list[str]) -> list[tuple[int, list[str], list[int]]]:
    """Per storage the names are on (in order of first appearance): its index, those names and
    their positions in the layout, in the order given -- read from the layout's storage column
    (no record per name)."""
    every = list(layout.names)
    at = range(len(every)) if names == every else list(map(layout.position, names))
    storage_at = layout.view_spans().storage
    members: dict[int, tuple[list[str], list[int]]] = {}
    for name, i, s in zip(names, at, storage_at[np.asarray(at, dtype=np.int64)].tolist()):
        group = members.get(s)
        if group is None:
            group = members[s] = ([], [])
        group[0].append(name)
        group[1].append(i)
    return [(s, group, where) for s, (group, where) in members.items()]


def _made_if_most(layout: Layout, groups: list[list[str]]) -> None:
    """When the groups whose records the plan reads hold most of the layout's views, make every
    record in one pass over the table (``layout.views``: 0.14 s for 100k, not 0.43 s one by one)."""
    if 2 * sum(map(len, groups)) > len(layout):
        _ = layout.views


class _Copied(NamedTuple):
    """What a view's copy step reads of it (its record's fields of the same names)."""

    name: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    is_contiguous: bool
    footprint_nbytes: int


def _copied(layout: Layout, names: list[str], at: list[int]) -> list[_Copied]:
    """The copy steps' facts of the views ``names`` at positions ``at``, from their geometries
    (as their records hold them: ``tensorviz.core.records.view_record``), not from records."""
    t = layout._table
    index = np.asarray(at, dtype=np.int64)
    geos, dtypes = t.geos, t.dtypes
    return [
        _Copied(name, (g := geos[gid]).shape, g.stride, g.contiguous, g.footprint * dtypes[d][1])
        for name, gid, d in zip(names, t.gid[index].tolist(), t.did[index].tolist())
    ]


def _keeper(
    layout: Layout, st, group: list[str], contiguous: dict[str, bool], conj: frozenset[str] = frozenset()
) -> TensorView | None:
    """The first of ``group`` that is complete, contiguous and as large as the storage, and no
    conjugate view (``conj``)."""
    complete = set(st.complete_names)
    for name in group if complete else ():
        if name in complete and name not in conj:
            v = layout[name]
            if contiguous.get(v.name, v.is_contiguous) and v.nbytes == st.nbytes:
                return v
    return None


def _why_drop(layout: Layout, v: TensorView, keep: TensorView) -> str:
    if CONJ_NOTE in v.note:
        return f"{keep.name}'s bytes as a conjugate view"
    if v.is_empty:
        return f"empty (reads no byte of {keep.name}'s storage)"
    rel = record_relation(v, keep) or layout.relation(v.name, keep.name)
    if rel == "identical":
        return f"an alias of {keep.name}"
    if v.dtype != keep.dtype:
        return f"{keep.name}'s bytes read as {v.dtype}"
    return {"same-bytes": f"{keep.name}'s bytes, rearranged", "within": f"a view into {keep.name}"}.get(
        rel, f"{rel} {keep.name}"
    )


def _restore(v: TensorView, keep: TensorView) -> str:
    if (v.start, v.shape, v.stride, v.dtype) == (keep.start, keep.shape, keep.stride, keep.dtype):
        return f"state_dict[{keep.name!r}]"
    return (
        f"_view_of(state_dict[{keep.name!r}], torch.{v.dtype}, {v.shape}, {v.stride}, "
        f"{(v.start - keep.start) // v.itemsize})"
    )


def _clone_line(v: TensorView | _Copied, contiguous: dict[str, bool], why: str) -> str:
    fmt = "" if contiguous.get(v.name, v.is_contiguous) else "memory_format=torch.contiguous_format"
    return f"fixed[{v.name!r}] = fixed[{v.name!r}].clone({fmt})  # {why}"


def _copy_steps(
    v: TensorView | _Copied, storage_nbytes: int, contiguous: dict[str, bool], save: list[str], load: list[str]
) -> None:
    expanded = (
        [i for i, (size, st) in enumerate(zip(v.shape, v.stride)) if st == 0 and size > 1] if 0 in v.stride else ()
    )
    if expanded:
        index = ", ".join("0:1" if i in expanded else ":" for i in range(len(v.shape)))
        save.append(
            f"fixed[{v.name!r}] = fixed[{v.name!r}][{index}].clone(memory_format=torch.contiguous_format)"
            f"  # expanded: save one copy, re-expand after loading"
        )
        load.append(f"state_dict[{v.name!r}] = state_dict[{v.name!r}].expand{v.shape}")
        return
    if not contiguous.get(v.name, v.is_contiguous):
        why = "non-contiguous: a packed copy"
    elif v.footprint_nbytes < storage_nbytes:
        why = f"reads {_bytes_text(v.footprint_nbytes)} of a {_bytes_text(storage_nbytes)} storage: write only those"
    else:
        why = "its own storage"
    save.append(_clone_line(v, contiguous, why))


@functools.lru_cache(maxsize=1024)
def _bytes_text(n: int) -> str:
    """:func:`format_bytes` of a byte count, remembered (a fix plan of 100k copies names a few sizes)."""
    return format_bytes(n)


def _torch_steps(st, views: list[TensorView], contiguous: dict[str, bool], save: list[str], load: list[str]) -> None:
    first_dtype = views[0].dtype
    if st.unreferenced_nbytes:
        for v in views:
            _copy_steps(v, st.nbytes, contiguous, save, load)
        return
    for v in views:
        if v.dtype != first_dtype:
            save.append(
                _clone_line(v, contiguous, f"reads the storage as {v.dtype}, torch.save refuses a second dtype")
            )


def _overlap_bytes(layout: Layout, names: list[str], st: Any, copies: list[_Copied]) -> int:
    """Bytes the copies of ``names`` (all on storage ``st``; ``copies`` their facts) write more than once."""
    if not names:
        return 0
    every = st.exact and len(names) == len(st.names) and set(names) == set(st.names)
    union = st.covered_nbytes if every else layout.union_nbytes(names)  # the storage's coverage is known
    return sum(c.footprint_nbytes for c in copies) - union
