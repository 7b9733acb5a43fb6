"""What the tests share: models, the zoo, servers, corpora, and the scripts the tests run as
subprocesses (each run as a module, ``python -m tests.helpers.<name>``, with the repository root
on ``PYTHONPATH``: no test or helper edits ``sys.path``)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def script(name: str) -> list[str]:
    """The command that runs ``tests/helpers/<name>.py`` as a module."""
    return [sys.executable, "-m", f"tests.helpers.{name}"]


def env(**extra: str) -> dict[str, str]:
    """``os.environ`` with the repository root first on ``PYTHONPATH`` (what a spawned helper
    needs to import ``tests.helpers`` and ``tensorviz``), plus ``extra``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (another process may still take it before it is bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
