"""Plain text of a module tree: one line per module or tensor, largest first.

Each line: the name and kind, the bytes attributed to it (counted once, see
:mod:`tensorviz.core.tree`), its share of the model, element count, and marks: ``↔`` a tensor
whose bytes are also read under other names (the partners are named), ``shared`` a module that
reads bytes counted elsewhere.

>>> import torch, tensorviz as tv
>>> from tensorviz.core.tree import model_tree
>>> w = torch.zeros(10, 4)
>>> print(tree_text(model_tree(tv.analyze({"emb.weight": w, "head.weight": w}))))
(model)           160 B 100.0%     40 elements
├─ emb            160 B 100.0%     40
│  └─ weight      160 B 100.0%     40  float32[10, 4]  ↔ shared with head.weight
└─ head             0 B   0.0%      0  shared 160 B counted elsewhere
   └─ weight        0 B   0.0%      0  float32[10, 4]  ↔ tied to emb.weight (counted there)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorviz.core.categories import category_words
from tensorviz.core.names import elide, terminal
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.tree import ModelTree, Node

__all__ = ["tree_text", "tree_lines", "format_count", "alike_runs", "RELATION_WORDS"]


def format_count(n: int) -> str:
    """Element counts as people say them: 950, 12.3K, 8.03B.

    >>> format_count(950), format_count(12_345), format_count(8_030_261_248)
    ('950', '12.3K', '8.03B')
    """
    for unit, size in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            value = n / size
            return f"{value:.3g}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)


def tree_lines(tree: ModelTree, depth: int | None = None, max_children: int | None = None) -> list[str]:
    """Lines of the tree down to ``depth`` levels, at most ``max_children`` per node (the rest
    summed on one ``…`` line)."""
    rows: list[tuple[str, str]] = []
    _walk(tree.root, "", "", depth, max_children, rows, tree.optimizer)
    width = max(len(left) for left, _ in rows)
    return [f"{left:<{width}}  {right}".rstrip() for left, right in rows]


def tree_text(tree: ModelTree, depth: int | None = None, max_children: int | None = None) -> str:
    return "\n".join(tree_lines(tree, depth, max_children))


def _walk(node: Node, lead: str, indent: str, depth: int | None, cap: int | None, rows: list, opt: str = "") -> None:
    rows.append((lead + _label(node), _numbers(node, root=not node.path, optimizer=opt)))
    if depth is not None and depth <= 0:
        return
    kids = alike_runs(node.children)
    shown = kids if cap is None or len(kids) <= cap else kids[: cap - 1]
    rest = [c for run in kids[len(shown) :] for c in run]
    for i, run in enumerate(shown):
        last = i == len(shown) - 1 and not rest
        lead, below = indent + ("└─ " if last else "├─ "), indent + ("   " if last else "│  ")
        if len(run) == 1:
            _walk(run[0], lead, below, _less(depth), cap, rows, opt)
            continue
        rows.append((lead + _run_label(run), _run_numbers(run)))
        if depth is None or depth > 1:  # one of them stands for all
            _walk(run[0], below + "└─ ", below + "   ", _less(_less(depth)), cap, rows, opt)
    if rest:
        nbytes = sum(c.nbytes for c in rest)
        share = nbytes / node.nbytes * node.fraction if node.nbytes else 0.0
        rows.append((f"{indent}└─ … {len(rest)} more", f"{format_bytes(nbytes):>9} {share:6.1%}"))


def alike_runs(children: tuple[Node, ...], least: int = 3) -> list[list[Node]]:
    """Children split into runs; ``least`` or more alike numbered modules in a row (the layers
    of a transformer: same class, bytes and elements) form one run, shown once."""
    out: list[list[Node]] = []
    for child in children:
        prev = out[-1][0] if out else None
        if prev is not None and _alike(prev, child):
            out[-1].append(child)
        else:
            out.append([child])
    return [piece for run in out for piece in ([run] if len(run) >= least else [[c] for c in run])]


def _alike(a: Node, b: Node) -> bool:
    """Numbered siblings (a ModuleList's layers) of one class with the same sizes."""
    same = (a.kind, a.nbytes, a.numel, a.ntensors) == (b.kind, b.nbytes, b.numel, b.ntensors)
    return same and bool(a.kind) and not a.is_tensor and a.name.isdigit() and b.name.isdigit()


def _run_label(run: list[Node]) -> str:
    return f"{_show(run[0].name)} … {_show(run[-1].name)}  {len(run)} × {_show(run[0].kind)}"


def _run_numbers(run: list[Node]) -> str:
    nbytes = sum(n.nbytes for n in run)
    text = f"{format_bytes(nbytes):>9} {sum(n.fraction for n in run):6.1%} {format_count(sum(n.numel for n in run)):>6}"
    return text + f"  ({format_bytes(run[0].nbytes)} each; one shown)"


def _less(depth: int | None) -> int | None:
    return None if depth is None else depth - 1


def _label(node: Node) -> str:
    name = _show(node.name)
    if node.is_tensor or not node.kind:
        return name
    return f"{name}  {_show(node.kind)}" if node.path else _show(node.kind)


def _numbers(node: Node, root: bool = False, optimizer: str = "") -> str:
    if node.kind == "skipped":
        return f"{'—':>9} {'':6}  skipped: {node.reason}"
    text = f"{format_bytes(node.nbytes):>9} {node.fraction:6.1%} {format_count(node.numel):>6}"
    if root:
        text += " elements"
    if node.view is not None:
        shown = node.view.logical or node.view  # a quantized tensor by its ggml type and logical shape
        text += f"  {shown.dtype}[{', '.join(map(str, shown.shape))}]"
        if node.kind.startswith("buffer"):
            text += f"  {node.kind}"
    if node.partners:
        text += "  ↔ " + _partner_text(node)
    elif node.shared_nbytes:
        text += f"  shared {format_bytes(node.shared_nbytes)} counted elsewhere"
    if node.kept:
        whole, unread = node.kept
        text += (
            f"  keeps its {format_bytes(whole)} storage alive; {unread:,} B of it no tensor reads (.clone() frees them)"
        )
    if not node.is_tensor and node.nskipped:
        text += f"  ({node.nskipped} skipped)"
    if len(node.categories) > 1:  # training state: what the module's bytes are
        text += "  " + category_words(node.categories, optimizer)
    return text


RELATION_WORDS = {
    "identical": "tied to",
    "same-bytes": "same bytes as",
    "within": "inside",
    "contains": "contains",
    "overlaps": "overlaps",
}


def _partner_text(node: Node, limit: int = 3) -> str:
    if node.counted_in:
        relation, owner = node.counted_in
        where = "counted there" if node.nbytes == 0 else f"{format_bytes(node.nbytes)} counted here"
        others = len(node.partners) - 1
        more = f"; shares with {others} more" if others > 0 else ""
        return f"{RELATION_WORDS.get(relation, relation)} {_show(owner)} ({where}{more})"
    names = ", ".join(_show(p) for p in node.partners[:limit])
    more = f", … {len(node.partners) - limit} more" if len(node.partners) > limit else ""
    return f"shared with {names}{more}"


def _show(text: str) -> str:
    """A name as a terminal may print it: escaped controls, elided when very long."""
    return elide(terminal(text), 80)
