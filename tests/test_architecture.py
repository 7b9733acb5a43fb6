"""The package's shape, checked: layers without cycles, light imports, small modules.

The layer contracts themselves are import-linter's (``lint-imports`` in ``make test``); these
tests check what it does not: no cycle among any modules, what a fresh interpreter imports, and
module sizes.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tensorviz"
LAYERS = ("core", "sources", "plan", "render", "savecheck", "explorer")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints a JSON document as its last line."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _tiny_safetensors(path: Path) -> Path:
    header = json.dumps({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    return path


HEAVY = "sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'matplotlib', 'ipywidgets', 'IPython'})"


def test_import_tensorviz_imports_neither_torch_nor_matplotlib():
    doc = _fresh(f"import sys, json, tensorviz; print(json.dumps({HEAVY}))")
    assert doc == []


def test_header_only_analysis_never_imports_torch(tmp_path):
    f = _tiny_safetensors(tmp_path / "model.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"a": "model.safetensors"}}))
    code = (
        "import sys, json, tensorviz as tv\n"
        f"a = tv.analyze({str(f)!r}); b = tv.analyze({str(index)!r}); c = tv.analyze({str(tmp_path)!r})\n"
        "assert a['a'].start == b['a'].start == c['a'].start\n"
        "a.groups('overlap'); a.storages; str(a); tv.diagram(a)\n"
        f"print(json.dumps({HEAVY}))"
    )
    assert _fresh(code) == []


def test_cli_json_on_a_safetensors_file_never_imports_torch(tmp_path):
    f = _tiny_safetensors(tmp_path / "model.safetensors")
    code = (
        "import sys, json, io, contextlib\n"
        "from tensorviz.cli import main\n"
        "buf = io.StringIO()\n"
        f"with contextlib.redirect_stdout(buf): rc = main([{str(f)!r}, '--json'])\n"
        f"print(json.dumps({{'rc': rc, 'names': [v['name'] for v in json.loads(buf.getvalue())['views']], "
        f"'heavy': {HEAVY}}}))"
    )
    assert _fresh(code) == {"rc": 0, "names": ["a"], "heavy": []}


def _graph():
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("tensorviz", exclude_type_checking_imports=True)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter[0]
                counter[0] += 1
                stack.append(node)
                on.add(node)
            nexts = edges.get(node, [])
            if i < len(nexts):
                work.append((node, i + 1))
                nxt = nexts[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle():
    class G:
        modules = {"a", "b", "c", "d"}

        @staticmethod
        def find_modules_directly_imported_by(m):
            return {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}[m]

    assert _cycles(G) == [["a", "b", "c"]]


def test_every_layer_is_a_package_with_a_docstring_saying_what_it_owns():
    for name in LAYERS:
        init = PACKAGE / name / "__init__.py"
        text = init.read_text()
        assert text.startswith('"""') and len(text.split('"""')[1].split()) >= 15, name


def test_no_module_over_400_lines():
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {k: v for k, v in sizes.items() if v > 400} == {}


def test_no_flat_private_family_prefixes_left_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"]
