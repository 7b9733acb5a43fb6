"""Executes every fix a save check suggests, in this process; run it as a subprocess.

``python tests/helpers/fix_runner.py CASE...`` prints one JSON line per case: how many fixes ran, and
the first failure (a fix that raised, a fixed dict a saver still rejects, a weight that did
not come back bit-exact). A fix that kills the interpreter (a segfault) leaves the line
``{"start": CASE}`` without its result, so the parent names the case that crashed.

Cases: ``roundtrip:NAME`` (tests/savecheck/test_saving_roundtrip.py's CASES), ``zoo:NAME`` (tests/helpers/zoo.py),
``freed:NAME`` (storages freed with ``resize_(0)``, as FSDP does between steps).
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

import tensorviz as tv


def _freed(name: str) -> Any:
    w = torch.randn(10)
    cases = {
        "alone": lambda: {"w": w},
        "with_view": lambda: collections.OrderedDict(w=w, part=w[2:5]),
        "module": lambda: nn.Linear(4, 4),
    }
    obj = cases[name]()
    for t in obj.state_dict().values() if isinstance(obj, nn.Module) else obj.values():
        t.detach().untyped_storage().resize_(0)
    return obj


def _build(case: str, seed: int) -> tuple[str, Any]:
    where, name = case.split(":", 1)
    if where == "zoo":
        from tests.helpers import zoo

        return "module", zoo.build(name, seed)
    if where == "freed":
        obj = _freed(name)
        return ("module" if isinstance(obj, nn.Module) else "mapping"), obj
    from tests.savecheck.test_saving_roundtrip import CASES

    kind, factory = CASES[name]
    return kind, factory(seed)


def _real(case: str, seed: int) -> Any:
    """What a case's fixes run on and reload into (a meta model's materialised twin)."""
    if case.startswith("roundtrip:"):
        from tests.savecheck.test_saving_roundtrip import real_object

        return real_object(case.split(":", 1)[1], seed)
    return _build(case, seed)[1]


def _state(obj: Any) -> dict[str, torch.Tensor]:
    return obj.state_dict() if isinstance(obj, nn.Module) else obj


def _bits(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().resolve_conj().contiguous().reshape(-1)  # a conjugate view: its values
    return flat.view(torch.uint8) if t.numel() else flat


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def _scrambled(case: str) -> Any:
    fresh = _real(case, 1)
    with torch.no_grad():
        for t in _state(fresh).values():
            if t.is_floating_point() and t.device.type != "meta":
                t.uniform_(-9, 9)
    return fresh


def run_case(case: str, tmp: Path) -> dict[str, Any]:
    kind, obj = _build(case, 0)
    report = tv.save_check(obj)
    if case.startswith("roundtrip:"):  # a meta model's fixes run on the model with data
        from tests.savecheck.test_saving_roundtrip import real_object

        obj = real_object(case.split(":", 1)[1], 0)
    out: dict[str, Any] = {"case": case, "fixes": 0, "problems": [v.saver for v in report if not v.ok]}
    out["without_fix"] = [v.saver for v in report if not v.ok and v.outcome != "could not evaluate" and not v.fixes]
    original = {k: v.detach().clone() for k, v in _state(obj).items() if v.untyped_storage().nbytes()}
    for v in report:
        for i, fix in enumerate(v.fixes):
            where = tmp / f"{v.saver}-{i}"
            where.mkdir()
            path = str(where / fix.path)
            ns: dict[str, Any] = {"model": obj} if kind == "module" else {"state_dict": obj}
            exec(fix.code(path), ns)  # noqa: S102 - executing the suggested fix is the point
            if "fixed" in ns and v.saver != "transformers.save_pretrained":
                check = "torch.save" if v.saver == "torch.save" else "safetensors.save_file"
                if not tv.save_check(ns["fixed"], savers=[check])[check].ok:
                    return {**out, "error": f"{v.saver} fix {i}: {check} still rejects the fixed dict"}
            back: dict[str, Any] = {"path": path, "model": _scrambled(case) if kind == "module" else None}
            exec(fix.load_code, back)  # noqa: S102
            bad = [n for n, t in original.items() if not _same(back["state_dict"][n], t)]
            if bad:
                return {**out, "error": f"{v.saver} fix {i}: {bad[0]} did not come back bit-exact"}
            out["fixes"] += 1
    return out


def main(cases: list[str]) -> None:
    warnings.simplefilter("ignore")
    for case in cases:
        print(json.dumps({"start": case}), flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            try:
                result = run_case(case, Path(tmp))
            except Exception as e:  # noqa: BLE001 - reported to the parent
                result = {"case": case, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
