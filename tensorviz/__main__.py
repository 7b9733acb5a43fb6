"""``python -m tensorviz PATH``: the same as the ``tensorviz`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
