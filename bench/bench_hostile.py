"""Time and peak memory of every file of the hostile corpus (issue 11's budgets).

Builds the corpus of ``tests/helpers/hostile_corpus.py`` in a temporary folder and analyses each file
in its own forked child (address-space limit, alarm), as the test does, then prints one line
per case (outcome, seconds, peak RSS above the child's start) and the worst of each. Cases
named ``object:...`` are live Python objects built in the child (size 0). Issue 21's budget:
a named error or the right answer within 2 s and 300 MB.

    .venv/bin/python bench/bench_hostile.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # the repository root: tests.helpers

from tests.helpers import env, hostile_corpus, script  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        cases = hostile_corpus.build(folder)
        sizes = {c: 0 if p.startswith("object:") else os.lstat(p).st_size for c, p in cases.items()}
        with open(os.path.join(folder, "cases.json"), "w") as f:
            json.dump(cases, f)
        run = subprocess.run(
            [*script("hostile_corpus"), folder],
            env=env(),
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    print(f"{'case':34} {'file':>11} {'seconds':>8} {'RSS MB':>7}  outcome")
    for r in rows:
        outcome = f"ok, {r['views']} views" if r["ok"] else r["error"]
        print(f"{r['case']:34} {sizes[r['case']]:>11,} {r['seconds'] or 0:>8.3f} {r['rss_mb'] or 0:>7.1f}  {outcome}")
    worst_t = max(rows, key=lambda r: r["seconds"] or 0)
    worst_m = max(rows, key=lambda r: r["rss_mb"] or 0)
    print(
        f"{len(rows)} files; worst time {worst_t['seconds']:.2f} s ({worst_t['case']}); "
        f"worst RSS +{worst_m['rss_mb']} MB ({worst_m['case']}); budget 2 s and 300 MB; "
        f"over 2 s: {', '.join(r['case'] for r in rows if (r['seconds'] or 0) > 2) or 'none'}"
    )


if __name__ == "__main__":
    main()
