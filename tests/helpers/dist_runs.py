"""Run tests/helpers/dist_worker.py once per world size per test session; both distributed test files share it."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import tempfile

from tests.helpers import env, script


@functools.cache
def worker_run(world: int) -> str:
    """The output folder of one spawned run on ``world`` ranks (gloo, CPU); fails with its stderr."""
    out = tempfile.mkdtemp(prefix=f"tv-dist{world}-")
    atexit.register(shutil.rmtree, out, True)
    run_ranks("dist_worker", [str(world), out], out, world, "done", timeout=240)
    return out


def run_ranks(name: str, args: list[str], out: str, world: int, done: str, timeout: int) -> None:
    """Run ``tests/helpers/<name>.py args`` (which spawns ``world`` gloo ranks); fail with its stderr.

    Each rank of such a script writes ``out/<done>.rank<r>`` after its last result and then meets the
    others at a barrier before it tears gloo down (see ``_torn_down_after_done``).
    """
    for _ in range(2):  # the free port is picked before the ranks bind it: another process may take it first
        proc = subprocess.run([*script(name), *args], capture_output=True, text=True, timeout=timeout, env=env())
        if proc.returncode == 0 or "Address already in use" not in proc.stderr:
            break
    if proc.returncode != 0 and not _torn_down_after_done(proc.stderr, out, world, done):
        raise AssertionError(f"{name}.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


def _torn_down_after_done(stderr: str, out: str, world: int, done: str) -> bool:
    """Whether every rank finished all its work and one then aborted inside torch's gloo teardown.

    ``destroy_process_group`` on gloo now and then aborts a rank with "terminate called without an
    active exception" (a joinable worker thread destroyed at exit; pytorch/pytorch#179291) after every
    result is written. Each rank writes ``<done>.rank<r>`` after its last result (then all meet at a
    barrier), so a run whose ranks all wrote it has complete results; any other failure still fails.
    """
    marks = all(os.path.exists(os.path.join(out, f"{done}.rank{rank}")) for rank in range(world))
    return marks and "terminate called without an active exception" in stderr


def rank_results(world: int, scenario: str) -> list[dict]:
    """Each rank's ``{"checked", "failures", "layout"}`` for one scenario."""
    out = worker_run(world)
    results = []
    for rank in range(world):
        with open(os.path.join(out, f"{scenario}.rank{rank}.json")) as f:
            results.append(json.load(f))
    return results
