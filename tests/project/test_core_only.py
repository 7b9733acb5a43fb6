"""The core alone (``pip install -e .``: numpy and torch): each function that needs an extra
says which ``pip install 'tensorviz[…]'`` adds it, a layout still displays as text, and the save
check lists the savers it could not run and why. Run in a child process where the optional
packages cannot be imported (``sys.modules[name] = None``, as for a package not installed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = [
    "matplotlib",
    "safetensors",
    "transformers",
    "peft",
    "accelerate",
    "ipywidgets",
    "anywidget",
    "huggingface_hub",
]

CHILD = textwrap.dedent(
    """
    import json, sys
    for name in BLOCKED:
        sys.modules[name] = None  # import raises ImportError, find_spec answers None: not installed
    import torch
    import tensorviz as tv

    m = torch.nn.Linear(4, 4)
    out = {}
    for key, call in {
        "show": lambda: tv.show(m),
        "explain": lambda: tv.explain(torch.zeros(2, 3)),
        "explain_interactive": lambda: tv.explain(torch.zeros(2, 3), interactive=True),
        "explore": lambda: tv.explore(m),
        "plot": lambda: tv.analyze(m).plot(),
    }.items():
        try:
            call()
            out[key] = "no error"
        except ImportError as err:
            out[key] = [type(err).__name__, str(err), err.name, isinstance(err, ImportError)]
    bundle = tv.analyze(m)._repr_mimebundle_()
    out["display"] = {k: v for k, v in bundle.items()}
    report = tv.save_check(m)
    out["save_check"] = [report.to_text().splitlines()[:2], [list(x) for x in report.not_run], report.to_html()]
    out["modules"] = sorted(n for n in BLOCKED if sys.modules.get(n) is not None)
    print(json.dumps(out))
    """
)

PLOT = "which is not installed: pip install 'tensorviz[plot]'"


@pytest.fixture(scope="module")
def child() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = f"BLOCKED = {BLOCKED!r}\n" + CHILD
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_functions_that_draw_name_their_extra(child):
    assert child["show"] == [
        "MissingExtraError",
        f"tv.show() draws the picture with matplotlib, {PLOT}",
        "matplotlib",
        True,
    ]
    assert child["explain"] == [
        "MissingExtraError",
        f"tv.explain() draws its figure with matplotlib, {PLOT}",
        "matplotlib",
        True,
    ]
    assert child["plot"] == ["MissingExtraError", f"Layout.plot() draws with matplotlib, {PLOT}", "matplotlib", True]
    assert child["explore"] == [  # the explorer's own message (tensorviz.explorer.widget)
        "ImportError",
        "tensorviz.explore needs ipywidgets>=8 and matplotlib: pip install 'tensorviz[widgets]' "
        "(or use tv.show(obj) for a static picture)",
        None,
        True,
    ]
    assert child["explain_interactive"][1] == (  # the widget's own message (tensorviz.explorer.explain_widget)
        "the interactive explain needs anywidget>=0.9: pip install 'tensorviz[widgets]' "
        "(or use tv.explain(...) for a static picture)"
    )
    assert child["modules"] == []  # nothing blocked got imported after all


def test_a_layout_displays_as_text_and_says_what_adds_the_picture(child):
    bundle = child["display"]
    assert sorted(bundle) == ["text/html", "text/plain"]
    note = f"(the picture needs matplotlib, {PLOT})"
    assert bundle["text/plain"].endswith("\n" + note)
    assert bundle["text/plain"].startswith("2 tensors on 2 storages (Linear)\n")
    assert bundle["text/html"].endswith(f"<p><i>{note.replace(chr(39), '&#x27;')}</i></p>")


def test_the_save_check_lists_the_savers_it_could_not_run(child):
    head, not_run, html = child["save_check"]
    files = "safetensors is not installed: pip install 'tensorviz[files]'"
    acc = "accelerate is not installed: pip install accelerate"
    assert head == [
        "Save check of Linear: 1 saver(s), unique tensor bytes 80 B",
        f"not run: safetensors.save_file, safetensors.save_model ({files})",
    ]
    assert not_run == [
        ["safetensors.save_file", files],
        ["safetensors.save_model", files],
        ["accelerate.save", acc],
        ["Accelerator.save_model", acc],
    ]
    assert "not run: accelerate.save, Accelerator.save_model (accelerate is not installed: pip install accelerate)" in (
        html.replace("<b>", "").replace("</b>", "")
    )
