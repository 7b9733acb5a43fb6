"""How fast the CLI starts on a safetensors file, as a ratio to a bare interpreter.

Prints, in one run (wall time, best of ``--repeat`` fresh processes each, milliseconds and the
ratio to ``python -c pass``):

* python -c pass             -- the floor: an interpreter that does nothing;
* import numpy               -- what the core needs;
* import tensorviz           -- the package (no torch, no matplotlib);
* tensorviz FILE --json      -- the CLI on a tiny safetensors file (header only, never torch);
* tensorviz INDEX --json     -- the same through a sharded index;
* import torch               -- the peer: what every run paid before the header reader dropped torch.

    .venv/bin/python bench/bench_startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tiny_checkpoint(folder: Path) -> tuple[Path, Path]:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}).encode()
    f = folder / "model.safetensors"
    f.write_bytes(struct.pack("<Q", len(header)) + header + bytes(64))
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"w": "model.safetensors"}}))
    return f, index


def best_ms(argv: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        f, index = tiny_checkpoint(Path(tmp))
        cases = [
            ("python -c pass", [py, "-c", "pass"]),
            ("import numpy", [py, "-c", "import numpy"]),
            ("import tensorviz", [py, "-c", "import tensorviz"]),
            ("tensorviz FILE --json", [py, "-m", "tensorviz", str(f), "--json"]),
            ("tensorviz INDEX --json", [py, "-m", "tensorviz", str(index), "--json"]),
            ("import torch (peer)", [py, "-c", "import torch"]),
        ]
        floor = None
        print(f"{'case':<26}{'ms':>9}{'x floor':>9}")
        for label, argv in cases:
            ms = best_ms(argv, args.repeat)
            floor = floor or ms
            print(f"{label:<26}{ms:>9.1f}{ms / floor:>9.1f}")


if __name__ == "__main__":
    main()
