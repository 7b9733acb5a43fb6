"""The README's quick start runs as written (it is the first code a newcomer copies)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Quick start") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_quick_start_runs_and_defines_what_it_uses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # what it writes (tv.export_html's page) goes there
    code = quick_start()
    assert "model = " in code.split("tv.explore(model)")[0]  # model is defined before it is used
    scope: dict = {}
    exec(compile(code, "README quick start", "exec"), scope)  # noqa: S102 - our own README
    layout = scope["layout"]
    assert (layout["b"].start, layout["b"].stop) == (4000, 8000)
    assert scope["tv"].analyze(scope["model"]).tree().find("1.weight").counted_in == ("identical", "0.weight")
    assert (tmp_path / "model.html").read_text("utf-8").startswith("<!DOCTYPE html>")


def test_readme_points_only_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert not target.startswith(("/", "..")), f"README links outside the repository: {target}"
        assert (README.parent / target).exists(), f"README links to a missing file: {target}"
    assert "shared/DESIGN" not in text  # a reader has only the repository
