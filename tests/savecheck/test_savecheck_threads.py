"""The save check changes nothing another thread can see.

Several threads run ``tv.save_check`` over and over while another thread really saves with
safetensors, torch and accelerate, and a watcher thread compares every module-level object of
the libraries involved with the object it held before (``is``) as often as it gets the GIL.
Every real file must be written and load back bit-exact, no library global may ever differ,
and every verdict must equal the single-threaded one.
"""

from __future__ import annotations

import collections
import importlib
import sys
import threading
import warnings

import pytest
import torch

import tensorviz as tv
from tests.helpers import zoo
from tests.helpers.models import FusedQKV, TiedLM, tiny_gpt2

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

WATCHED = [
    "safetensors.torch",
    "torch",
    "torch.serialization",
    "accelerate.utils",
    "accelerate.utils.other",
    "accelerate.utils.modeling",
    "accelerate.logging",
    "transformers.modeling_utils",
    "transformers.core_model_loading",
    "transformers.pytorch_utils",
    "huggingface_hub",
    "warnings",
    "logging",
]


def _cases() -> dict[str, object]:
    w = torch.randn(4, 6)
    return {
        "tied": TiedLM(),
        "fused": FusedQKV(),
        "w_wt": collections.OrderedDict(w=w, wt=w.t()),
        "plain_shared": {"a": w, "b": w},
        "gpt2": tiny_gpt2(tied=True),
        "mixtral": zoo.build("mixtral"),  # transformers' conversion step, on meta twins
    }


def _snapshot() -> dict[str, dict[str, object]]:
    out = {}
    for name in WATCHED:
        mod = importlib.import_module(name)
        out[name] = dict(vars(mod))
    return out


def _changed(snapshot: dict[str, dict[str, object]]) -> list[str]:
    bad = []
    for name, before in snapshot.items():
        now = vars(sys.modules[name])
        bad += [f"{name}.{k}" for k, v in before.items() if now.get(k, v) is not v]
    return bad


def _real_saves(tmp, rounds: int, errors: list[str], stop: threading.Event) -> None:
    from accelerate.utils import save
    from safetensors.torch import load_file, save_file, save_model

    try:
        for i in range(rounds):
            tensors = {"x": torch.full((3, 5), float(i)), "y": torch.arange(7, dtype=torch.int64) + i}
            save_file(tensors, tmp / f"f{i}.safetensors")
            torch.save(tensors, tmp / f"t{i}.pt")
            save_model(TiedLM(), tmp / f"m{i}.safetensors")
            save(collections.OrderedDict(tensors), tmp / f"a{i}.safetensors", safe_serialization=True)
            for kind in ("f", "a"):
                back = load_file(tmp / f"{kind}{i}.safetensors")
                if not all(torch.equal(back[k], tensors[k]) for k in tensors):
                    errors.append(f"{kind}{i}: wrong bytes")
            back = torch.load(tmp / f"t{i}.pt", weights_only=True)
            if not all(torch.equal(back[k], tensors[k]) for k in tensors):
                errors.append(f"t{i}: wrong bytes")
            if sorted(load_file(tmp / f"m{i}.safetensors")) != ["lm_head.weight", "ln.bias", "ln.weight"]:
                errors.append(f"m{i}: wrong names")
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"real save failed: {type(e).__name__}: {e}")
    finally:
        stop.set()


def _checks(cases, expected, rounds: int, errors: list[str]) -> None:
    try:
        for _ in range(rounds):
            for name, obj in cases.items():
                got = tv.save_check(obj).to_dict()
                if got != expected[name]:
                    errors.append(f"{name}: verdict differs from the single-threaded one")
    except Exception as e:  # noqa: BLE001
        errors.append(f"check failed: {type(e).__name__}: {e}")


def _watch(snapshot, stop: threading.Event, seen: list[str], filters, showwarning) -> None:
    while not stop.is_set():
        seen.extend(_changed(snapshot))
        if warnings.filters is not filters or warnings.showwarning is not showwarning:
            seen.append("warnings.filters/showwarning swapped")


@pytest.mark.parametrize("repeat", range(3))
def test_concurrent_checks_and_real_saves(tmp_path, repeat):
    cases = _cases()
    expected = {name: tv.save_check(obj).to_dict() for name, obj in cases.items()}
    snapshot = _snapshot()
    errors: list[str] = []
    seen: list[str] = []
    stop, saves_done = threading.Event(), threading.Event()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: a swap lasting microseconds gets seen
    try:
        watcher = threading.Thread(target=_watch, args=(snapshot, stop, seen, warnings.filters, warnings.showwarning))
        saver = threading.Thread(target=_real_saves, args=(tmp_path, 12, errors, saves_done))
        checkers = [threading.Thread(target=_checks, args=(cases, expected, 3, errors)) for _ in range(4)]
        watcher.start()
        saver.start()
        for t in checkers:
            t.start()
        for t in [*checkers, saver]:
            t.join()
    finally:
        stop.set()
        watcher.join()
        sys.setswitchinterval(old)
    assert errors == []
    assert sorted(set(seen)) == []
    assert _changed(snapshot) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{k}{i}.{'pt' if k == 't' else 'safetensors'}" for i in range(12) for k in "ftma"
    )


def test_save_file_is_the_library_function_after_checks():
    import safetensors.torch as st

    before = st.save_file, st.save_model
    tv.save_check(TiedLM())
    assert (st.save_file, st.save_model) == before
    assert st.save_file.__module__ == "safetensors.torch" and st.save_file.__name__ == "save_file"
