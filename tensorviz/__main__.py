"""``python -m tensorviz PATH``: the same as the ``tensorviz`` command."""

from __future__ import annotations

from tensorviz.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
