"""Run the canvas's pure JavaScript (``tensorviz/explorer/geometry.js``) in node from a test."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

GEOMETRY = Path(__file__).resolve().parents[2] / "tensorviz" / "explorer" / "geometry.js"


def run_geometry(tmp_path: Path, body: str) -> Any:
    """``body`` (a module with geometry.js imported as ``g``) run by node: the JSON it printed.
    Skips the test, with the reason, where node is not installed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: geometry.js cannot be run here")
    script = tmp_path / "geometry_run.mjs"
    script.write_text(f"import * as g from {json.dumps(GEOMETRY.as_uri())};\n{body}", encoding="utf-8")
    return json.loads(
        subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60, check=True).stdout
    )
