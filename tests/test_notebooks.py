"""Every notebook runs headlessly without error and shows its pictures (also when saved)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(900)]


def _pictures(nb) -> int:
    return sum("image/png" in out.get("data", {})
               for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))


def _errors(nb) -> list[str]:
    return [f"{out.get('ename')}: {out.get('evalue')}"
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def test_there_are_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_views_and_storages.ipynb", "02_debugging_weight_tying.ipynb", "03_exploring_a_checkpoint.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_shows_pictures_without_a_kernel(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert not _errors(nb), f"{path.name} was committed with errors: {_errors(nb)}"
    assert _pictures(nb) >= 3, f"{path.name} has no saved pictures: run `make notebooks`"
    unexecuted = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()
                  and c.get("execution_count") is None]
    assert not unexecuted, f"{path.name}: cells {unexecuted} were never run; run `make notebooks`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_draws(path, tmp_path, monkeypatch):
    from run_notebooks import execute

    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = execute(path)
    assert not _errors(nb)
    assert _pictures(nb) >= 3, f"{path.name} produced fewer than 3 pictures"
