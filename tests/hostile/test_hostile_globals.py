"""No library global is swapped (issue 21, classes 8 and 9), proven under threads.

* The collector pause (``core.rows.gc_paused``) is one counted, locked, process-wide state: with
  many threads pausing at once at a tiny switch interval, the collector's state from before the
  first pause is restored when the last ends -- never left off (1,000 bursts).
* PNGs are drawn without ``mpl.rc_context``: a user's rcParams changes made while tensorviz draws
  on other threads are never reverted, and ``text.hinting`` is never changed (1,000 bursts).
"""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from tensorviz.core.rows import gc_paused

BURSTS = 1_000


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _burst(n_threads: int, work) -> list[str]:
    """Run ``work`` on ``n_threads`` threads at once; what each found wrong."""
    start = threading.Barrier(n_threads)
    wrong: list[str] = []

    def run() -> None:
        start.wait()
        wrong.extend(work())

    threads = [threading.Thread(target=run) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong


def _pauses(n: int = 10) -> list[str]:
    wrong = []
    for _ in range(n):
        with gc_paused():
            with gc_paused():  # re-entrant
                pass
            if gc.isenabled():
                wrong.append("the collector ran during a pause")
    return wrong


@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off"])
def test_gc_pause_is_restored_exactly_once_under_threads(fast_switching, enabled):
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        left_wrong, during = 0, []
        for _ in range(BURSTS):
            during += _burst(4, _pauses)
            left_wrong += gc.isenabled() != enabled
        assert left_wrong == 0, f"{left_wrong} of {BURSTS} bursts left the collector {'off' if enabled else 'on'}"
        assert not during, f"{len(during)} pauses saw the collector on"
    finally:
        (gc.enable if was else gc.disable)()


def _draw_into(out: list, fig, png_bytes) -> None:
    out.append(png_bytes(fig, dpi=20, compress_level=0))


def test_png_drawing_never_touches_rcparams(fast_switching):
    import matplotlib as mpl

    from tensorviz.render.mpl.figure import TensorvizFigure, png_bytes

    fig = TensorvizFigure(figsize=(0.6, 0.3), dpi=20)
    fig.text(0.1, 0.5, "w", fontsize=6)
    before_hinting = mpl.rcParams["text.hinting"]
    old_width = mpl.rcParams["lines.linewidth"]
    reverted = 0
    try:
        for k in range(BURSTS):
            drawn: list[bytes] = []
            drawer = threading.Thread(target=_draw_into, args=(drawn, fig, png_bytes))
            drawer.start()
            mpl.rcParams["lines.linewidth"] = 1.0 + k  # the user's change, made during a draw
            drawer.join()
            reverted += mpl.rcParams["lines.linewidth"] != 1.0 + k
            assert drawn[0][:4] == b"\x89PNG"
            assert mpl.rcParams["text.hinting"] == before_hinting
    finally:
        mpl.rcParams["lines.linewidth"] = old_width
    assert reverted == 0, f"{reverted} of {BURSTS} user changes were reverted"


def test_png_bytes_leaves_every_rcparam_as_it_was():
    import matplotlib as mpl

    from tensorviz.render.mpl.figure import TensorvizFigure, png_bytes

    before = dict(mpl.rcParams)
    fig = TensorvizFigure(figsize=(1, 0.5))
    fig.text(0.1, 0.5, "a label")
    png_bytes(fig)
    assert dict(mpl.rcParams) == before
