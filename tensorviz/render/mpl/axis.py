"""A binary byte axis for matplotlib: ticks on powers of two, labels in B/KiB/MiB/GiB/TiB.

The locator puts ticks on multiples of a power-of-two step (4 to ``nbins`` ticks in view). The
formatter labels every tick in the unit of the largest one when the step needs at most one
decimal there ("0.5 MiB", "1 MiB", "1.5 MiB"), else in the largest smaller unit that does
("128 B", "256 B", not "0.125 KiB"), and when zoomed far from zero it moves the large common
part into an offset shown at the axis end ("+1 GiB"). ``format_data`` gives the exact byte
readout used by the cursor.

Imports matplotlib at module top: import it only from functions that draw.

>>> loc = ByteLocator()
>>> loc.tick_values(0, 16000).tolist()
[0.0, 2048.0, 4096.0, 6144.0, 8192.0, 10240.0, 12288.0, 14336.0]
>>> fmt = ByteFormatter(); fmt.set_locs(loc.tick_values(0, 16000))
>>> [fmt(x) for x in (0, 2048, 4096)]
['0', '2 KiB', '4 KiB']
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.ticker import Formatter, Locator

from tensorviz.core.units import TO_TIB as UNITS
from tensorviz.core.units import exact_bytes

__all__ = ["ByteLocator", "ByteFormatter", "exact_bytes", "readout", "UNITS"]


_MAX_DECIMALS = 1  # tick labels: "1.5 KiB" reads well, "0.125 KiB" reads worse than "128 B"


def _unit_for(step: float) -> tuple[str, int]:
    for name, size in UNITS:
        if step >= size:
            return name, size
    return "B", 1


def readout(x: float) -> str:
    """Exact cursor readout: the byte index, and the size in binary units when large.

    >>> readout(999.6), readout(4000.4), readout(3 * 2**20 + 5)
    ('byte 1,000', 'byte 4,000 (3.906 KiB)', 'byte 3,145,733 (3.000 MiB)')
    """
    b = int(math.floor(x + 0.5)) if x >= 0 else int(math.ceil(x - 0.5))
    name, size = _unit_for(abs(b))
    if size == 1:
        return f"byte {b:,}"
    return f"byte {b:,} ({b / size:.3f} {name})"


class ByteLocator(Locator):
    """Ticks on multiples of the power-of-two step that gives at most ``nbins`` ticks (>= 1 B).

    >>> ByteLocator(nbins=4).tick_values(1000, 1100).tolist()
    [1024.0, 1056.0, 1088.0]
    """

    def __init__(self, nbins: int = 8):
        if nbins < 2:
            raise ValueError(f"nbins must be at least 2, got {nbins}")
        self.nbins = nbins

    def __call__(self):
        assert self.axis is not None, "a locator is called once set on an axis"
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float) -> np.ndarray:  # type: ignore[override]  # matplotlib's locators return arrays (stubs: Sequence)
        vmin, vmax = sorted((float(vmin), float(vmax)))
        width = vmax - vmin
        if width <= 0 or not math.isfinite(width):
            return np.array([vmin])
        step = float(2 ** max(0, math.ceil(math.log2(width / self.nbins))))
        first = math.ceil(vmin / step) * step
        count = int(math.floor((vmax - first) / step + 1e-9)) + 1
        return first + step * np.arange(max(count, 0), dtype=np.float64)


class ByteFormatter(Formatter):
    """Tick labels in the binary unit of the tick step, with an offset when zoomed far out.

    >>> fmt = ByteFormatter(); fmt.set_locs([2**30 + 64, 2**30 + 128, 2**30 + 192])
    >>> [fmt(x) for x in (2**30 + 64, 2**30 + 128)], fmt.get_offset()
    (['64 B', '128 B'], '+1 GiB')
    """

    def __init__(self, max_label_units: int = 10_000):
        self.max_label_units = max_label_units
        self._ticks: list[float] = []
        self.step = 1.0
        self.unit: tuple[str, int] = ("B", 1)
        self.decimals = 3
        self.offset = 0

    def set_locs(self, locs) -> None:
        self._ticks = [float(x) for x in locs]
        diffs = np.diff(sorted(self._ticks))
        self.step = float(diffs[diffs > 0].min()) if (diffs > 0).any() else 1.0
        self.unit = _unit_for(self.step)
        self.offset = self._offset()
        self.unit, self.decimals = self._label_unit()

    def _offset(self) -> int:
        if not self._ticks:
            return 0
        lo, hi = min(self._ticks), max(self._ticks)
        if lo <= 0 or hi / self.unit[1] < self.max_label_units:
            return 0
        # A power of two at least the tick range, so the offset is a multiple of the step.
        block = 2 ** math.ceil(math.log2(max(hi - lo, self.step) * 2))
        return int(math.floor(lo / block) * block)

    def _label_unit(self) -> tuple[tuple[str, int], int]:
        """The largest unit, up to that of the largest label, in which the step needs at most
        one decimal ("0.5 KiB" steps; "128 B", not "0.125 KiB"). Returns the unit and the
        decimals. Steps are powers of two, so bytes always work with none."""
        top = max((abs(x - self.offset) for x in self._ticks), default=0.0)
        for name, size in UNITS:
            if size > max(top, 1):
                continue
            for decimals in range(_MAX_DECIMALS + 1):
                q = self.step / size * 10**decimals
                if abs(q - round(q)) < 1e-9:
                    return (name, size), decimals
        return ("B", 1), 0

    def __call__(self, x: float, pos=None) -> str:
        v = x - self.offset
        if v == 0:
            return "0"
        name, size = self.unit
        text = f"{v / size:.{self.decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return f"{text} {name}"

    def get_offset(self) -> str:
        return f"+{exact_bytes(self.offset)}" if self.offset else ""

    def format_data(self, value: float) -> str:
        return readout(value)

    def format_data_short(self, value: float) -> str:
        return readout(value)
