"""Write the notebooks in notebooks/ from their cell lists in tools/notebook_src/ (no outputs).

The notebooks are documentation: their text and code live in ``tools/notebook_src/NN_name.py``
(a list ``CELLS`` of ``md(...)``/``code(...)`` cells), so an edit is a reviewable diff. After
editing, rebuild and re-execute them:

    python tools/build_notebooks.py        # writes notebooks/*.ipynb without outputs
    python tools/run_notebooks.py          # (make notebooks) executes them, saves the outputs

Text is dedented and stripped; cell ids are stable (``cell-00``, ...), so rebuilding an
unchanged source gives an unchanged notebook.
"""

from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOURCES = Path(__file__).resolve().parent / "notebook_src"


def md(text: str) -> tuple[str, str]:
    """A markdown cell."""
    return ("md", text)


def code(text: str) -> tuple[str, str]:
    """A code cell (keep it small: one idea per cell)."""
    return ("code", text)


def sources() -> dict[str, list[tuple[str, str]]]:
    """``{notebook stem: cells}`` for every ``tools/notebook_src/NN_*.py``, in name order."""
    out = {}
    for path in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        out[path.stem] = runpy.run_path(str(path), init_globals={"md": md, "code": code})["CELLS"]
    return out


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook (nbformat 4) from ``("md" | "code", source)`` pairs, with stable cell ids."""
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, (kind, source) in enumerate(cells):
        text = textwrap.dedent(source).strip("\n")
        cell = new_markdown_cell(text) if kind == "md" else new_code_cell(text)
        cell.id = f"cell-{i:02d}"
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for name, cells in sources().items():
        if wanted and name not in wanted and f"{name}.ipynb" not in wanted:
            continue
        path = NOTEBOOKS / f"{name}.ipynb"
        nbformat.write(build(cells), path)
        print(f"wrote {path.relative_to(ROOT)} ({len(cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
