"""Execute the notebooks in notebooks/ and save them with their outputs (``make notebooks``).

Each notebook runs top to bottom in a fresh kernel of this environment, with ``notebooks/`` as the
working directory; widget state is stored so JupyterLab and GitHub show the pictures with no kernel.
Re-running an unchanged notebook keeps it the same (no per-cell timestamps, a fixed hash seed in
the kernel, widget model ids renamed in a fixed order: see :func:`stable_widget_ids`) except in two
places: matplotlib salts each SVG's clip-path ids at random (so that two pictures in one page never
share an id), and a library's own log lines carry their time.

    python tools/build_notebooks.py        # after editing tools/notebook_src/
    python tools/run_notebooks.py [NOTEBOOK ...]
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
_MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-f]{32})")


def execute(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run one notebook in a fresh kernel and return it with outputs (raises on a cell error)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=True,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    # A fixed hash seed: library messages that print sets come out in the same order every run.
    client.execute(env={**os.environ, "PYTHONHASHSEED": "0"})
    return stable_widget_ids(nb, salt=path.stem)


def stable_widget_ids(nb: nbformat.NotebookNode, salt: str = "") -> nbformat.NotebookNode:
    """Rename the random widget model ids to ids that depend only on the notebook's structure.

    Roots are the models the outputs display, in output order; then every model they refer to
    (``IPY_MODEL_<id>``), breadth first in the order of the sorted state JSON; then any model
    left over, by its state. Each gets ``md5(salt:position)``, so an unchanged notebook keeps
    its ids and its saved file does not churn.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not state:
        return nb
    roots = [
        out["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if "application/vnd.jupyter.widget-view+json" in out.get("data", {})
    ]
    order: list[str] = []
    queue = [m for m in roots if m in state]
    while queue:
        model = queue.pop(0)
        if model in order:
            continue
        order.append(model)
        queue += [m for m in _MODEL_REF.findall(json.dumps(state[model], sort_keys=True)) if m in state]
    order += sorted((m for m in state if m not in order), key=lambda m: json.dumps(state[m], sort_keys=True))
    text = nbformat.writes(nb)
    for i, old in enumerate(order):
        text = text.replace(old, hashlib.md5(f"{salt}:{i}".encode()).hexdigest())
    return nbformat.reads(text, as_version=4)


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        print(f"executing {path.relative_to(ROOT) if path.is_absolute() else path} ...", flush=True)
        nb = execute(path.resolve())
        nbformat.write(nb, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
