"""The packing of a quantized weight, drawn: the corner of the logical ``[out, in]`` weight as a
grid whose cells are coloured by the stored word that holds them, each cell labelled with its
word's number and the bits of the word it takes (``w3 4–7``); what ``tv.explain(obj,
packed=name)`` returns. The words themselves are listed under the grid, first eight, each with
the elements it holds (:class:`~tensorviz.core.packing.PackingMap`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorviz.plan.colors import PALETTE, contrast_ratio
from tensorviz.render.mpl.figure import TensorvizFigure, literal_texts

if TYPE_CHECKING:
    from tensorviz.core.packing import PackedWord, PackingMap

__all__ = ["packing_figure"]

#: Words listed under the grid (the rest are in ``print(tv.explain_packing(obj, name))``).
LISTED = 8


def packing_figure(pm: PackingMap) -> TensorvizFigure:
    """Draw ``pm``: one cell per element of the corner, its word's colour and number, its bits.

    >>> import torch, bitsandbytes as bnb, tensorviz as tv
    >>> m = torch.nn.Sequential(bnb.nn.Linear8bitLt(4, 2, has_fp16_weights=False)).to("cpu")
    >>> fig = tv.explain(m, packed="0.weight")
    >>> sorted(t.get_text() for t in fig.axes[0].texts)[:2]
    ['w0 0–7', 'w1 0–7']
    """
    cell_w, cell_h, line_h = 0.62, 0.42, 0.115  # inches
    lines = [f"w{k} = {_word_line(w)}" for k, w in enumerate(pm.words[:LISTED])]
    if len(pm.words) > LISTED:
        lines.append(f"… {len(pm.words) - LISTED} more words: print(tv.explain_packing(obj, name))")
    lines.append(f"rule: {pm.how}")
    top, grid, ticks, below = 0.45, cell_h * pm.rows, 0.35, line_h * len(lines) + 0.1
    width, height = max(6.0, 0.8 + cell_w * pm.cols), top + grid + ticks + below
    fig = TensorvizFigure(figsize=(width, height))
    ax = fig.add_axes((0.5 / width, (ticks + below) / height, 1 - 0.6 / width, grid / height))
    ax.set_xlim(0, pm.cols)
    ax.set_ylim(pm.rows, 0)
    ax.set_xticks([i + 0.5 for i in range(pm.cols)], [str(i) for i in range(pm.cols)], fontsize=7)
    ax.set_yticks([o + 0.5 for o in range(pm.rows)], [str(o) for o in range(pm.rows)], fontsize=7)
    ax.tick_params(length=0)
    for k, word in enumerate(pm.words):
        colour = PALETTE[k % len(PALETTE)]
        ink = "black" if contrast_ratio(colour, "#000000") >= contrast_ratio(colour, "#ffffff") else "white"
        for (o, i), lo, hi in word.elements:
            ax.add_patch(_rect(i, o, colour))
            ax.text(i + 0.5, o + 0.5, f"w{k} {lo}–{hi - 1}", ha="center", va="center", fontsize=6.5, color=ink)
    ax.set_title(f"{pm.name} ({pm.kind}): the stored word holding each element [o, i]", fontsize=9, loc="left")
    fig.text(0.5 / width, 0.05 / height, "\n".join(lines), fontsize=6.5, family="monospace", va="bottom")
    literal_texts(fig)  # names are data, never mathtext
    return fig


def _word_line(w: PackedWord) -> str:
    """``qweight[0, 1] bytes [1,428, 1,432): [1, 0] … [1, 7] (8 values)``: the word, its bytes
    and the first and last element it holds (the whole list: ``print(pm)``)."""
    part = w.name.rsplit(".", 1)[-1]
    at = f"{part}[{', '.join(map(str, w.index))}] bytes [{w.byte:,}, {w.byte + w.nbytes:,})"
    (first, _, _), (last, _, _) = w.elements[0], w.elements[-1]
    held = f"[{first[0]}, {first[1]}]" + (f" … [{last[0]}, {last[1]}]" if len(w.elements) > 1 else "")
    return f"{at}: {held} ({len(w.elements)} of {w.holds} values)"


def _rect(x: int, y: int, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=colour, edgecolor="white", linewidth=1)
