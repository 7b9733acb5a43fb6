"""Runs the fixes a size report suggests, for real; run it as a subprocess.

``python tests/helpers/size_fix_runner.py CASE FIXES.json OUT_DIR`` builds CASE (tests/helpers/size_cases.py)
afresh for each fix, executes its code with ``ckpt`` bound to it (in OUT_DIR), then saves
``ckpt`` with torch.save as ``checkpoint.pt`` unless the code saved a file itself, and prints
the size of the file each fix wrote, as a JSON list.
"""

from __future__ import annotations

import json
import os
import re
import sys

import torch

from tests.helpers.size_cases import CASES


def run(case: str, codes: list[str], out: str) -> list[int]:
    sizes = []
    for i, code in enumerate(codes):
        where = os.path.join(out, f"fix{i}")
        os.makedirs(where)
        os.chdir(where)
        scope = {"torch": torch, "ckpt": CASES[case]()}
        exec(code, scope)  # the code a user would paste
        saved = re.search(r'torch\.save\(.*, "([^"]+)"\)', code)
        name = saved.group(1) if saved else "checkpoint.pt"
        if not saved:
            torch.save(scope["ckpt"], name)
        sizes.append(os.path.getsize(name))
    return sizes


if __name__ == "__main__":
    with open(sys.argv[2]) as f:
        print(json.dumps(run(sys.argv[1], json.load(f), sys.argv[3])))
