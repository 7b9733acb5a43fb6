"""The binary byte axis: power-of-two ticks, unit labels, offsets when zoomed, exact readout."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from tensorviz.render.mpl.axis import ByteFormatter, ByteLocator, exact_bytes, readout

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(
    "lo,hi,step,first,count",
    [
        (0, 16000, 2048, 0, 8),
        (0, 100, 16, 0, 7),
        (0, 5, 1, 0, 6),  # never below one byte
        (1000, 1100, 16, 1008, 6),
        (0, 3 * GiB, 512 * MiB, 0, 7),
        (5 * GiB + 3, 5 * GiB + 700, 128, 5 * GiB + 128, 5),
    ],
)
def test_locator_power_of_two_steps(lo, hi, step, first, count):
    ticks = ByteLocator().tick_values(lo, hi)
    assert ticks[0] == first and len(ticks) == count
    assert set((ticks[1:] - ticks[:-1]).tolist()) == {float(step)}
    assert lo <= ticks[0] and ticks[-1] <= hi


def test_locator_degenerate_and_reversed():
    assert ByteLocator().tick_values(7, 7).tolist() == [7.0]
    assert ByteLocator().tick_values(16, 0).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]
    with pytest.raises(ValueError, match="nbins"):
        ByteLocator(nbins=1)


def labels(lo, hi):
    ticks = ByteLocator().tick_values(lo, hi)
    fmt = ByteFormatter()
    return fmt.format_ticks(ticks), fmt.get_offset()


@pytest.mark.parametrize(
    "lo,hi,expected,offset",
    [
        (0, 100, ["0", "16 B", "32 B", "48 B", "64 B", "80 B", "96 B"], ""),
        (0, 16000, ["0", "2 KiB", "4 KiB", "6 KiB", "8 KiB", "10 KiB", "12 KiB", "14 KiB"], ""),
        (0, 3 * MiB, ["0", "0.5 MiB", "1 MiB", "1.5 MiB", "2 MiB", "2.5 MiB", "3 MiB"], ""),
        (0, 1500, ["0", "256 B", "512 B", "768 B", "1024 B", "1280 B"], ""),  # not "0.25 KiB"
        (0, 1000, ["0", "128 B", "256 B", "384 B", "512 B", "640 B", "768 B", "896 B"], ""),
        (5000, 9000, ["5 KiB", "5.5 KiB", "6 KiB", "6.5 KiB", "7 KiB", "7.5 KiB", "8 KiB", "8.5 KiB"], ""),
        (0, 200 * KiB, ["0", "32 KiB", "64 KiB", "96 KiB", "128 KiB", "160 KiB", "192 KiB"], ""),
        (0, 12 * MiB, ["0", "2 MiB", "4 MiB", "6 MiB", "8 MiB", "10 MiB", "12 MiB"], ""),
        (0, 16 * GiB, ["0", "2 GiB", "4 GiB", "6 GiB", "8 GiB", "10 GiB", "12 GiB", "14 GiB", "16 GiB"], ""),
        (
            3 * KiB,
            3 * KiB + 64,
            ["3072 B", "3080 B", "3088 B", "3096 B", "3104 B", "3112 B", "3120 B", "3128 B", "3136 B"],
            "",
        ),
    ],
)
def test_formatter_units_follow_the_step(lo, hi, expected, offset):
    assert labels(lo, hi) == (expected, offset)


def test_formatter_moves_large_base_into_offset_when_zoomed():
    got, offset = labels(GiB + 100, GiB + 600)
    assert offset == "+1 GiB"
    assert got == ["128 B", "192 B", "256 B", "320 B", "384 B", "448 B", "512 B", "576 B"]
    got, offset = labels(3 * MiB + 512 * KiB + 10, 3 * MiB + 512 * KiB + 40)
    assert offset == "+3.5 MiB" and got[0] == "12 B"


def test_formatter_labels_never_need_more_than_one_decimal():
    """A zoomed step of 128 B reads "128 B, 384 B", never "0.125 KiB, 0.375 KiB"."""
    fmt = ByteFormatter()
    fmt.set_locs([896, 1024, 1152, 1280])
    assert fmt.unit == ("B", 1) and fmt.decimals == 0
    assert [fmt(x) for x in (896, 1024, 1152)] == ["896 B", "1024 B", "1152 B"]
    fmt.set_locs([MiB, MiB + 512 * KiB, 2 * MiB])
    assert fmt.unit == ("MiB", MiB) and fmt.decimals == 1
    for lo, hi in [(0, 1500), (GiB - 5000, GiB + 9000), (3 * MiB, 3 * MiB + 700), (0, 5 * GiB + 123)]:
        got, _ = labels(lo, hi)
        assert all(len(x.split(" ")[0].partition(".")[2]) <= 1 for x in got), got


def test_exact_bytes_and_readout():
    assert [exact_bytes(n) for n in (0, 1, 1000, 1024, 1536, 3 * MiB, 7 * GiB, 1025)] == [
        "0 B",
        "1 B",
        "1000 B",
        "1 KiB",
        "1.5 KiB",
        "3 MiB",
        "7 GiB",
        "1025 B",
    ]
    assert readout(0.4) == "byte 0"
    assert readout(1023.6) == "byte 1,024 (1.000 KiB)"
    assert readout(5 * GiB + 1) == "byte 5,368,709,121 (5.000 GiB)"
    fmt = ByteFormatter()
    assert fmt.format_data(2047.0) == fmt.format_data_short(2047.0) == "byte 2,047 (1.999 KiB)"


def test_axis_uses_them_in_a_figure():
    fig = Figure()
    ax = fig.add_subplot()
    ax.set_xlim(0, 4 * MiB)
    ax.xaxis.set_major_locator(ByteLocator())
    ax.xaxis.set_major_formatter(ByteFormatter())
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "0",
        "0.5 MiB",
        "1 MiB",
        "1.5 MiB",
        "2 MiB",
        "2.5 MiB",
        "3 MiB",
        "3.5 MiB",
        "4 MiB",
    ]
