"""Pastes every fix a load check suggests and runs it, in this process; run it as a subprocess.

``python tests/helpers/loadfix_runner.py CASE...`` prints one JSON line per case: how many fixes the
check suggested and the first failure (the pasted code raised, the load it ends with reported
missing or unexpected keys, a tie the fix makes is not one tensor, a weight does not hold the
value it was fed). Each fix runs on freshly built objects, as a user would paste it.

Cases: ``sd:NAME`` (tests/loadcheck/test_loadcheck.py's SCENARIOS, loader load_state_dict) and ``fp:NAME``
(tests/loadcheck/test_loadcheck_pretrained.py's SCENARIOS, loader from_pretrained).
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from typing import Any

import torch

import tensorviz as tv


def _problems(r: Any) -> int:
    return int(r.raises) + len(r.missing) + len(r.unexpected) + len(r.conflicts)


def _sd_case(name: str, tmp: str) -> tuple[int, str | None]:
    """Each fix pasted on fresh objects: the load it ends with raises nothing and reports no
    missing (but a name of a tie the fix re-makes) or unexpected key; every weight holds what the fixed state dict feeds it (a tie
    still fed twice: the winner the check predicts; a tie re-made: its first name's); and the
    check finds fewer problems in the fixed load than before (a re-made tie is one tensor)."""
    from tests.loadcheck.test_loadcheck import SCENARIOS, _real_source

    make_model, make_source, strict, assign = SCENARIOS[name]
    r = tv.load_check(make_model(), make_source(tmp), strict=strict, assign=assign)
    for fix in r.fixes:
        model, state_dict = make_model(), dict(_real_source(make_source(tmp)))
        seen: dict[str, list] = {}
        model.register_load_state_dict_post_hook(
            lambda m, k, seen=seen: seen.update(missing=list(k.missing_keys), unexpected=list(k.unexpected_keys))
        )
        ns: dict[str, Any] = {"model": model, "state_dict": state_dict, "torch": torch}
        try:
            exec(fix.code, ns)  # noqa: S102 -- pasting the suggested code is the test
        except Exception as err:  # noqa: BLE001
            return len(r.fixes), f"{fix.title}: {type(err).__name__}: {err}"
        retied = {n for g in r.ties_broken for n in g}  # a name the re-made tie now feeds
        if set(seen.get("missing", ())) - retied or seen.get("unexpected"):
            return len(r.fixes), f"{fix.title}: the load still reports {seen}"
        again = tv.load_check(make_model(), ns["state_dict"], strict=strict, assign=assign)
        failure = _holds(model, ns["state_dict"], again) or _ties_kept(model, r)
        if not failure and _problems(again) >= _problems(r) and not r.ties_broken:
            failure = f"the fixed load has as many problems: {again.to_json()}"
        if failure:
            return len(r.fixes), f"{fix.title}: {failure}"
    return len(r.fixes), None


def _holds(model: Any, state_dict: dict, again: Any) -> str | None:
    """Every model tensor holds what the fixed state dict feeds it (the predicted winner for a
    tie still fed twice, the first name's for a tie re-made after assign=True)."""
    feeds = {n: c.winner for c in again.conflicts for n in c.names}
    held = model.state_dict()
    for group in again.ties_broken:  # re-made: every name holds the one tensor kept
        kept = [
            n
            for n in group
            if n in state_dict and all(torch.equal(held[m], state_dict[n].to(held[m].dtype)) for m in group)
        ]
        feeds.update(dict.fromkeys(group, kept[0] if kept else "(none of the tie's sources)"))
    for name, t in held.items():
        source = feeds.get(name, name)
        if source not in state_dict and name in state_dict:
            return f"{name} holds none of its tie's sources"
        if source in state_dict and not torch.equal(t, state_dict[source].to(t.dtype)):
            return f"{name} does not hold {source}'s values"
    return None


def _ties_kept(model: Any, r: Any) -> str | None:
    params = dict(model.named_parameters(remove_duplicate=False))
    for group in r.ties_broken:
        if len({id(params[n]) for n in group}) != 1:
            return f"{sorted(group)} are not one tensor after the fix"
    return None


def _fp_case(name: str, tmp: str) -> tuple[int, str | None]:
    """Each fix pasted: afterwards, the weights not loaded from the files are exactly those the
    check predicts for the fixed call (its predictions are checked against real loads above)."""
    from tensorviz.loadcheck.pretrained import pretrained_class
    from tests.loadcheck.test_loadcheck_pretrained import SCENARIOS, _file_tensors, _loaded_from, _model_arg

    spec, make_folder, kwargs = SCENARIOS[name]
    folder = make_folder(tmp)
    model_arg = _model_arg(spec)
    r = tv.load_check(model_arg, folder, loader="from_pretrained", loader_kwargs=kwargs)
    cls = pretrained_class(model_arg)[0]
    files = _file_tensors(folder)
    for fix in r.fixes:
        fixed = tv.load_check(model_arg, folder, loader="from_pretrained", loader_kwargs=dict(fix.keywords))
        ns: dict[str, Any] = {"folder": folder, "torch": torch, cls.__name__: cls}
        if not isinstance(model_arg, type):
            ns["config"] = model_arg
        try:
            exec(fix.code, ns)  # noqa: S102 -- pasting the suggested code is the test
        except Exception as err:  # noqa: BLE001
            return len(r.fixes), f"{fix.title}: {type(err).__name__}: {err}"
        sd = ns["model"].state_dict()
        random = sorted(k for k, v in sd.items() if _loaded_from(v, files) is None)
        if fixed.raises or fixed.missing or fixed.unexpected or random != sorted(fixed.untouched):
            return len(r.fixes), f"{fix.title}: after the fix {random} are not from the files; {fixed.to_json()}"
    return len(r.fixes), None


def run(case: str) -> dict:
    where, name = case.split(":", 1)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n, failure = (_sd_case if where == "sd" else _fp_case)(name, tmp)
    return {"case": case, "fixes": n, "failure": failure}


if __name__ == "__main__":
    for case in sys.argv[1:]:
        print(json.dumps(run(case)), flush=True)
