"""The package's shape, checked: layers without cycles, light imports, short functions.

What matters, not a line count: the layer contracts (import-linter's, run here and in
``make test``); no import cycle among any modules, counting every import statement (module
level, inside functions, and under ``TYPE_CHECKING``); no function over 80 lines; and what a
fresh interpreter imports for ``import tensorviz`` and for header-only file reading.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tensorviz"
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


def test_header_only_readers_import_neither_torch_nor_matplotlib_on_a_dcp_folder(tmp_path):
    torch = pytest.importorskip("torch")
    import warnings

    import torch.distributed.checkpoint as dcp

    folder = tmp_path / "ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no process group: saving from one process"
        dcp.save({"w": torch.arange(6.0).view(2, 3)}, checkpoint_id=str(folder))
    code = (
        "import sys, json, tensorviz as tv\n"
        f"a = tv.analyze({str(folder)!r})\n"
        "a.groups('overlap'); a.storages; str(a); tv.diagram(a)\n"
        f"print(json.dumps({HEAVY}))"
    )
    assert _fresh(code) == []


def _graph():
    """Every import statement of the package: module level, in functions and under TYPE_CHECKING."""
    grimp = pytest.importorskip("grimp")
    return grimp.build_graph("tensorviz", exclude_type_checking_imports=False)


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


def test_no_import_cycles_counting_function_level_and_type_checking_imports():
    graph = _graph()
    # the graph does see imports inside functions (the torch checkpoint reader, imported only when
    # a folder holds a torch file) and under TYPE_CHECKING (a type named only for annotations)
    assert graph.direct_import_exists(
        importer="tensorviz.sources.formats.table", imported="tensorviz.sources.formats.checkpoint"
    )
    assert _cycles(graph) == []


def test_layer_contracts_hold():
    """import-linter's contracts of pyproject.toml (layers; pure core and plan; header-only readers)."""
    pytest.importorskip("importlinter")
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("lint-imports is not installed")
    root = PACKAGE.parent
    out = subprocess.run([exe], capture_output=True, text=True, timeout=300, cwd=root, check=False)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


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


def _long_functions(source: str, most: int) -> dict[str, int]:
    """``{qualified name: lines}`` of every function (methods and nested ones too) over ``most`` lines."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = child.end_lineno - child.lineno + 1
                if lines > most:
                    out[name[:-1]] = lines
            visit(child, name)

    visit(ast.parse(source), "")
    return out


def test_no_function_over_80_lines():
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, lines in _long_functions(path.read_text(), 80).items():
            long[f"{path.relative_to(PACKAGE)}:{name}"] = lines
    assert long == {}


def test_long_function_finder_sees_methods_and_nested_functions():
    def body(indent: int, n: int) -> str:
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(n))

    source = (
        "class A:\n    def m(self):\n"
        + body(8, 81)  # 82 lines
        + "def f():\n    def g():\n"
        + body(8, 80)
        + "    return g\n"  # g: 81 lines, f: 83
        + "def h():\n"
        + body(4, 79)  # 80 lines: allowed
    )
    assert _long_functions(source, 80) == {"A.m": 82, "f": 83, "f.g": 81}


def test_no_flat_private_family_prefixes_left_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "cli.py"]


def test_every_upward_hook_is_listed_once_and_registered():
    """The lower layers' upward calls are the names of core.hooks.HOOKS, each answered once."""
    import tensorviz  # noqa: F401  (registers the answers)
    from tensorviz.core import hooks

    assert set(hooks._REGISTRY) == set(hooks.HOOKS)
    calls = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "call":
                if getattr(node.func.value, "id", "") == "hooks":
                    calls.add(node.args[0].value)
    assert calls == set(hooks.HOOKS)


TESTS = PACKAGE.parent / "tests"
#: A package under tests/ per layer of the package it tests, plus the cross-cutting ones.
TEST_FOLDERS = {*LAYERS, "loadcheck", "distributed", "hostile", "browser", "project", "helpers", "js"}


def test_tests_live_in_folders_mirroring_the_package_with_a_helpers_package():
    loose = sorted(p.name for p in TESTS.glob("*.py") if p.name not in ("__init__.py", "conftest.py"))
    assert loose == [], f"put these in a folder of tests/ (tests/<layer>/ or tests/helpers/): {loose}"
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders == TEST_FOLDERS
    for folder in folders - {"js"}:
        assert (TESTS / folder / "__init__.py").exists(), folder


def test_no_test_or_helper_edits_sys_path():
    """Tests import their helpers as ``tests.helpers.<name>``; spawned helpers run as modules
    (``tests.helpers.script``/``env``), so nothing needs ``sys.path`` edited."""
    edits = re.compile(r"sys\.path(\.insert|\.append|\[[^\]]*\]\s*=)")
    found = [
        f"{p.relative_to(TESTS)}:{i}"
        for p in TESTS.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if edits.search(line)
    ]
    assert found == []
