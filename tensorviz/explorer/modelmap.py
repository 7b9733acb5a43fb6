"""The model map: where a model's bytes go, as a nested treemap the explorer shows first.

Python picks the cells (:func:`map_cells`, pure: the module tree of
:func:`tensorviz.core.tree.model_tree` opened level by level from the focused module while the
cells fit :data:`MAP_CELLS`); the ES module ``modelmap.js`` lays them out as a squarified
treemap (the pure layout in ``treemap.js``) on a canvas and draws them. Areas are bytes counted
once (a tied weight's bytes under its first name); a cell that reads bytes counted under
another name is hatched for them, so a tie shows as hatch, not as memory. Hover a cell: its
path, class, bytes and share; click it: :attr:`ModelMap.picked` names it (the explorer filters
its diagram to that module and opens the map there).

>>> import torch, tensorviz as tv                                   # doctest: +SKIP
>>> m = ModelMap(tv.analyze(model).tree())                          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from tensorviz.core.names import elide, terminal
from tensorviz.core.tree import ModelTree, Node, format_count
from tensorviz.core.units import TO_TIB, byte_text
from tensorviz.explorer import modules
from tensorviz.plan.colors import PALETTE

__all__ = ["ModelMap", "map_cells", "MAP_CELLS", "CHILD_CAP"]

#: Most cells (leaves of the opened tree) the map draws: the next level opens only while they fit.
MAP_CELLS = 120
#: Most children one cell is split into: the largest ``CHILD_CAP - 1`` and one "… N more" cell.
CHILD_CAP = 96
_NAME_CAP = 120  # characters of a name kept in a cell's label and tooltip (start … end)

_ENTRY = "modelmap.js"


def map_cells(tree: ModelTree, focus: str = "", most: int = MAP_CELLS) -> list[list[Any]]:
    """The cells of the map of ``tree`` opened at ``focus``: the focused node, then whole levels
    of its descendants while the leaves number at most ``most`` (a level that would exceed it
    stays closed; the first level always opens).

    Each cell is ``[path, label, parent, own, shared, kind, depth]``: ``parent`` the index of
    its parent cell (-1 for the focus), ``own`` the bytes counted in it, ``shared`` the bytes it
    reads that are counted under another name (drawn hatched), ``kind`` the module's class or
    the tensor's dtype and shape. A node split past :data:`CHILD_CAP` children ends with a cell
    ``["", "… N more", parent, own, shared, "", depth]`` for the rest.

    >>> import torch, tensorviz as tv
    >>> w = torch.zeros(10, 4)
    >>> t = tv.analyze({"emb.weight": w, "head.weight": w, "head.bias": torch.zeros(10)}).tree()
    >>> [c[:5] for c in map_cells(t)]  # children largest first by bytes read (own + shared)
    [['', '(model)', -1, 200, 0], ['head', 'head', 0, 40, 160], ['emb', 'emb', 0, 160, 0], ['head.weight', 'weight', 1, 0, 160], ['head.bias', 'bias', 1, 40, 0], ['emb.weight', 'weight', 2, 160, 0]]
    """
    root = tree.find(focus) if focus else tree.root
    cells = [_cell(root, -1, 0)]
    level, leaves = [(root, 0)], 1
    while level:
        opening = [(node, k) for node, k in level if node.children]
        added = sum(min(len(node.children), CHILD_CAP) for node, _ in opening) - len(opening)
        if not opening or (len(cells) > 1 and leaves + added > most):
            break
        leaves += added
        level = []
        for node, k in opening:
            for child, cell in _children(node, k, cells[k][6] + 1):
                cells.append(cell)
                if child is not None:
                    level.append((child, len(cells) - 1))
    return cells


def _children(node: Node, parent: int, depth: int) -> list[tuple[Node | None, list[Any]]]:
    kids = sorted(node.children, key=lambda c: -(c.nbytes + c.shared_nbytes))
    out: list[tuple[Node | None, list[Any]]] = [(c, _cell(c, parent, depth)) for c in kids[: CHILD_CAP - 1]]
    rest = kids[CHILD_CAP - 1 :]
    if len(rest) == 1:
        out.append((rest[0], _cell(rest[0], parent, depth)))
    elif rest:
        own, shared = sum(c.nbytes for c in rest), sum(c.shared_nbytes for c in rest)
        out.append((None, ["", f"… {len(rest):,} more", parent, own, shared, "", depth]))
    return out


def _cell(node: Node, parent: int, depth: int) -> list[Any]:
    kind = node.kind if not node.is_tensor else ""
    if node.view is not None:
        kind = f"{node.view.dtype}[{', '.join(map(str, node.view.shape))}]"
    return [
        node.path,
        elide(terminal(node.name), _NAME_CAP),
        parent,
        node.nbytes,
        node.shared_nbytes,
        terminal(kind),
        depth,
    ]


class ModelMap(anywidget.AnyWidget):
    """The model map widget: ``cells`` (:func:`map_cells`) drawn as a treemap; ``picked`` is
    ``[path, n]``: the cell clicked in the browser ("" for "whole model") and a click count (a
    second click on one cell is a change too)."""

    _esm = modules.linked(_ENTRY)
    _css = modules.HERE / "explorer.css"
    cells: traitlets.List = traitlets.List().tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)
    colors = traitlets.List(list(PALETTE)).tag(sync=True)  # the diagram's palette: one per top-level part
    units = traitlets.List([[name, size] for name, size in TO_TIB]).tag(sync=True)  # core/units.py's table
    picked: traitlets.List = traitlets.List().tag(sync=True)  # [path, click count] of the last click in the browser
    # compare mode: per tensor cell drawn, a line about its match in b (the hover adds it)
    notes: traitlets.Dict = traitlets.Dict().tag(sync=True)

    def __init__(self, tree: ModelTree, **kwargs: Any):
        super().__init__(**kwargs)
        self.tree = tree
        self.note_of: Callable[[str], str] | None = None
        self.add_class("tvz-map")
        modules.watch(self, _ENTRY)
        self.focus("")

    def focus(self, path: str) -> None:
        """Open the map at ``path`` (a module or tensor; "" the whole model)."""
        node = self.tree.find(path) if path else self.tree.root
        if node.is_tensor and path:  # a tensor has no parts: show it among its siblings
            path = path.rpartition(".")[0]
            node = self.tree.find(path) if path else self.tree.root
        self.cells = map_cells(self.tree, path)
        self._send_notes()
        where = elide(terminal(path), _NAME_CAP) if path else "the whole model"
        self.caption = (
            f"model map: {where} · {byte_text(node.nbytes)} counted once, {format_count(node.numel)} elements · "
            f"area = bytes; hatched = bytes read here but counted under another name (a tie) · click a module to open it"
        )

    def set_notes(self, note_of: Callable[[str], str] | None) -> None:
        """Compare mode: ``note_of(name)`` is the line a tensor cell's hover adds about its match
        in b (:meth:`tensorviz.explorer.compare.CompareRows.note`); None: not comparing."""
        self.note_of = note_of
        self._send_notes()

    def _send_notes(self) -> None:
        note_of, tree = self.note_of, self.tree
        tensors = (c[0] for c in self.cells if c[0] and (node := tree.find(c[0])) is not None and node.is_tensor)
        self.notes = {} if note_of is None else {path: note_of(path) for path in tensors}
