"""Execute the notebooks in notebooks/ and save them with their outputs (``make notebooks``).

Each notebook runs top to bottom in a fresh kernel of this environment, with ``notebooks/`` as the
working directory; widget state is stored so JupyterLab and GitHub show the pictures with no kernel.

    python tools/run_notebooks.py [NOTEBOOK ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def execute(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run one notebook in a fresh kernel and return it with outputs (raises on a cell error)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        print(f"executing {path.relative_to(ROOT) if path.is_absolute() else path} ...", flush=True)
        nb = execute(path.resolve())
        nbformat.write(nb, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
