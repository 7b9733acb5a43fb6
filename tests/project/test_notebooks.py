"""Every notebook runs headlessly without error and shows its pictures (also when saved).

The committed notebooks are built from ``tools/notebook_src/`` (``tools/build_notebooks.py``)
and executed by ``make notebooks``; these tests check that they were, that they still run, and
that running them writes nothing into the repository.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_NOTEBOOK_BYTES = 1_500_000  # so they load quickly on GitHub

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(900)]


def _outputs(nb):
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def _pictures(nb) -> int:
    return sum("image/png" in out.get("data", {}) for out in _outputs(nb))


def _errors(nb) -> list[str]:
    return [f"{out.get('ename')}: {out.get('evalue')}" for out in _outputs(nb) if out.get("output_type") == "error"]


def _html_pictures(nb) -> int:
    """Outputs whose text/html fallback embeds the picture (the PNG, or its pixels as lossless WebP):
    what untrusted views and sanitizers show."""
    html = (out.get("data", {}).get("text/html", "") for out in _outputs(nb))
    return sum("data:image/png;base64," in h or "data:image/webp;base64," in h for h in html)


def test_there_are_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_views_and_storages.ipynb",
        "02_debugging_weight_tying.ipynb",
        "03_exploring_a_checkpoint.ipynb",
        "04_a_large_model_on_meta.ipynb",
        "05_sharded_models.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_shows_pictures_without_a_kernel(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    assert not _errors(nb), f"{path.name} was committed with errors: {_errors(nb)}"
    assert _pictures(nb) >= 3, f"{path.name} has no saved pictures: run `make notebooks`"
    assert _html_pictures(nb) >= 2, f"{path.name}: no HTML fallback with an embedded picture"
    unexecuted = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and c.source.strip() and c.get("execution_count") is None
    ]
    assert not unexecuted, f"{path.name}: cells {unexecuted} were never run; run `make notebooks`"
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name} was not run top to bottom in one kernel"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_is_small(path):
    size = path.stat().st_size
    assert size < MAX_NOTEBOOK_BYTES, f"{path.name} is {size:,} bytes; use smaller figures or fewer outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_matches_its_source(path):
    """The cells are exactly those in tools/notebook_src (edit there, then rebuild and rerun)."""
    import nbformat

    from tools.build_notebooks import build, sources

    expected = build(sources()[path.stem])
    committed = nbformat.read(path, as_version=4)
    assert [(c.cell_type, c.source) for c in committed.cells] == [(c.cell_type, c.source) for c in expected.cells], (
        f"{path.name} differs from tools/notebook_src/{path.stem}.py: run "
        "`python tools/build_notebooks.py && make notebooks`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_draws(path, monkeypatch):
    from tools.run_notebooks import execute

    monkeypatch.setenv("MPLBACKEND", "Agg")
    before = sorted(p.name for p in path.parent.iterdir())
    nb = execute(path)
    assert not _errors(nb)
    assert _pictures(nb) >= 3, f"{path.name} produced fewer than 3 pictures"
    after = sorted(p.name for p in path.parent.iterdir())
    assert after == before, f"{path.name} wrote files into notebooks/: {sorted(set(after) - set(before))}"
