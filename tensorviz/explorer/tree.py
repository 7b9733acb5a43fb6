"""The explorer's model map: a collapsible, searchable module tree (largest first) and a
"where the memory goes" view of the selected module's parts.

A self-contained ipywidgets component over :func:`tensorviz.core.tree.model_tree`: choosing a
module sets :attr:`TreePanel.selected` (a traitlet the explorer observes to filter its diagram
to that module, see :meth:`TreePanel.name_pattern`); choosing it again with "expand" opens it;
a tensor whose bytes are shared offers "go to partner". The memory view draws the selected
module's children as bars proportional to their bytes (counted once), hatched where they read
bytes counted under another name, so a tied weight shows up as hatch, not as memory.

>>> import torch, tensorviz as tv                                    # doctest: +SKIP
>>> panel = TreePanel(tv.analyze(model))                             # doctest: +SKIP
"""

from __future__ import annotations

import html
import re

import ipywidgets as W
import traitlets

from tensorviz.core.layout import Layout
from tensorviz.core.names import FILTER_CAP
from tensorviz.core.tree import RELATION_WORDS, ModelTree, Node, format_count
from tensorviz.core.units import format_bytes

__all__ = ["TreePanel", "memory_html", "MAX_ROWS", "MAX_BARS"]

#: Most rows the tree list or a search shows (the rest are counted on a last row).
MAX_ROWS = 400
#: Most bars the memory view draws (the rest are summed in one bar).
MAX_BARS = 12

_NBSP = "\u00a0"
# Nothing in the panel may be wider than the panel (a 1024-px window with the sidebar open gives
# it under 300 px): the memory view's text and names wrap, the buttons wrap, and the tree list
# (a <select>, whose rows cannot wrap) scrolls sideways inside its own box instead of clipping.
_CSS = """<style>
.tvt-panel{min-width:0;}
.tvt-panel select{font-family:var(--jp-code-font-family,monospace);font-size:12px;}
.tvt-panel .widget-select{overflow-x:auto;min-width:0;}
.tvt-panel .widget-select>select{min-width:max-content;}
.tvt-panel .widget-hbox{flex-wrap:wrap;gap:2px 0;}
.tvt-panel .widget-button{max-width:none;}
.tvt-panel .widget-html,.tvt-panel .widget-html-content{width:auto;min-width:0;max-width:100%;line-height:normal;}
</style>"""
_MEMORY_CSS = """<style>
.tvt-mem{font-family:var(--jp-code-font-family,monospace);font-size:12px;line-height:1.35;color:var(--jp-content-font-color1,#222);
  min-width:0;max-width:100%;white-space:normal;overflow-wrap:anywhere;}
.tvt-mem .row{display:grid;grid-template-columns:minmax(0,1.4fr) minmax(32px,1fr) 9ch 6ch;column-gap:6px;align-items:center;}
.tvt-mem .num{white-space:nowrap;}
.tvt-mem .bar{height:11px;background:var(--jp-layout-color3,#e0e0e0);}
.tvt-mem .bar i{display:inline-block;height:100%;vertical-align:top;background:var(--jp-brand-color1,#1976d2);}
.tvt-mem .bar i.sh{background:repeating-linear-gradient(45deg,#e65100 0 3px,transparent 3px 6px);}
.tvt-mem .num{text-align:right;}
.tvt-mem .muted{color:var(--jp-content-font-color2,#666);}
</style>"""


class TreePanel(W.VBox):
    """Search box, tree list, buttons and the memory view of one layout's module tree."""

    selected = traitlets.Unicode("").tag(sync=False)

    def __init__(self, tensor_layout: Layout, **kwargs):
        super().__init__(**kwargs)
        self.tree: ModelTree = tensor_layout.tree()
        self._nodes = _Nodes(self.tree)  # a node is made when read: 100k tensors are not all listed
        self.expanded: set[str] = {""}
        self._refreshing = False
        self.search = W.Text(
            placeholder="search modules and tensors", continuous_update=False, layout=W.Layout(width="auto")
        )
        self.rows = W.Select(options=[], rows=14, layout=W.Layout(width="auto"))
        self.toggle_button = W.Button(description="expand", icon="plus", layout=W.Layout(width="auto"))
        self.partner_button = W.Button(description="go to partner", disabled=True, layout=W.Layout(width="auto"))
        self.whole_button = W.Button(description="whole model", layout=W.Layout(width="auto"))
        self.memory = W.HTML(layout=W.Layout(width="auto"))
        self.add_class("tvt-panel")
        buttons = W.HBox([self.toggle_button, self.partner_button, self.whole_button])
        self.children = [W.HTML(_CSS), self.search, self.rows, buttons, self.memory]
        self.search.observe(lambda _: self.refresh(), "value")
        self.rows.observe(self._on_row, "value")
        self.toggle_button.on_click(lambda _: self.toggle(self.selected))
        self.partner_button.on_click(lambda _: self.go_to_partner())
        self.whole_button.on_click(lambda _: self.select(""))
        self.refresh()

    # -- actions ------------------------------------------------------------------------
    def select(self, path: str) -> None:
        """Select a module or tensor by path ("" is the whole model); opens its parents."""
        if path not in self._nodes:
            raise KeyError(f"no module or tensor {path!r} in this model; search for it in the box above")
        parts = path.split(".") if path else []
        self.expanded.update(".".join(parts[:k]) for k in range(len(parts)))
        self.selected = path
        self.refresh()

    def toggle(self, path: str) -> None:
        """Open a closed module, close an open one (the model itself stays open)."""
        if path and path in self.expanded:
            self.expanded.discard(path)
        elif self._nodes[path].children:
            self.expanded.add(path)
        self.refresh()

    def go_to_partner(self) -> None:
        """Select the name that owns (or first shares) the selected tensor's bytes."""
        node = self._nodes[self.selected]
        target = node.counted_in[1] if node.counted_in else (node.partners[0] if node.partners else None)
        if target is not None:
            self.select(target)

    def name_pattern(self) -> str:
        """A name filter (regular expression) for the selected module: its tensors only."""
        if not self.selected:
            return ""
        return "^" + re.escape(self.selected) + r"(\.|$)"

    # -- drawing ------------------------------------------------------------------------
    def refresh(self) -> None:
        query = self.search.value.strip()[:FILTER_CAP]
        options = self._search_rows(query) if query else self._tree_rows()
        values = [v for _, v in options]
        self._refreshing = True  # new options reset the list's value: not a choice of the user
        try:
            self.rows.options = options
            self.rows.value = self.selected if self.selected in values else None
        finally:
            self._refreshing = False
        node = self._nodes[self.selected]
        is_open = bool(self.selected) and self.selected in self.expanded
        self.toggle_button.description, self.toggle_button.icon = (
            ("collapse", "minus") if is_open else ("expand", "plus")
        )
        self.toggle_button.disabled = not node.children or not self.selected
        self.partner_button.disabled = not (node.counted_in or node.partners)
        self.memory.value = memory_html(node if node.children else self._parent(node), self.tree.total_nbytes)

    def _on_row(self, change) -> None:
        path = change["new"]
        if self._refreshing or path is None or path == self.selected or path.startswith("\0"):
            return
        self.selected = path
        if self._nodes[path].children:
            self.expanded.add(path)
        self.refresh()

    def _parent(self, node: Node) -> Node:
        return self._nodes[node.path.rpartition(".")[0]] if node.path else node

    def _tree_rows(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        stack = [self.tree.root]
        while stack and len(out) < MAX_ROWS:
            node = stack.pop()
            out.append((_row_text(node, node.depth, node.path in self.expanded), node.path))
            if node.path in self.expanded:
                stack.extend(reversed(node.children))
        if stack:
            out.append((f"… {len(stack)} more rows not listed (search for a name)", "\0more"))
        return out

    def _search_rows(self, query: str) -> list[tuple[str, str]]:
        q = query.lower()
        hits = [n for n in self.tree.nodes() if n.path and q in n.path.lower()]
        out = [(_row_text(n, 0, False, full=True), n.path) for n in hits[:MAX_ROWS]]
        if len(hits) > MAX_ROWS:
            out.append((f"… {len(hits) - MAX_ROWS} more matches", "\0more"))
        return out or [(f"no module or tensor name contains {query!r}", "\0none")]


class _Nodes:
    """The tree's nodes by path, each found (and made) when asked for."""

    def __init__(self, tree: ModelTree) -> None:
        self.tree = tree

    def __getitem__(self, path: str) -> Node:
        return self.tree.find(path)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        try:
            self.tree.find(path)
        except KeyError:
            return False
        return True


def _row_text(node: Node, depth: int, is_open: bool, full: bool = False) -> str:
    """One list row: indent, open/closed mark, name, class or shape, bytes, % and a share mark."""
    mark = ("▾" if is_open else "▸") if node.children else "·"
    name = (node.path if full else node.name) or "(model)"
    what = node.kind if node.kind and not node.is_tensor else ""
    if node.view is not None:
        what = f"{node.view.dtype}[{', '.join(map(str, node.view.shape))}]"
    share = ""
    if node.counted_in:
        share = f"  ↔ {RELATION_WORDS.get(node.counted_in[0], node.counted_in[0])} {node.counted_in[1]}"
    elif node.partners:
        share = f"  ↔ shared with {node.partners[0]}" + (" …" if len(node.partners) > 1 else "")
    text = f"{mark} {name}  {what}  {format_bytes(node.nbytes)} · {node.fraction:.1%}{share}"
    return _NBSP * (2 * depth) + text.replace(" ", _NBSP)


def memory_html(node: Node, total: int) -> str:
    """Where a module's memory goes: a bar per child (largest first, at most
    :data:`MAX_BARS`, the rest summed) as wide as its share of the module, hatched beside it
    where the child reads bytes counted elsewhere."""
    e = html.escape
    kids = list(node.children)
    scale = max(node.nbytes, max((c.nbytes + c.shared_nbytes for c in kids), default=0), 1)
    rows = [
        _bar_row(e(c.name), e(c.kind if not c.is_tensor else ""), c.nbytes, c.shared_nbytes, scale)
        for c in kids[: MAX_BARS - 1]
    ]
    if len(kids) >= MAX_BARS:
        rest = kids[MAX_BARS - 1 :]
        rows.append(
            _bar_row(f"… {len(rest)} more", "", sum(c.nbytes for c in rest), sum(c.shared_nbytes for c in rest), scale)
        )
    head = (
        f"<b>where the memory goes: {e(node.path or '(model)')}</b> "
        f'<span class="muted">{format_bytes(node.nbytes)}, {node.fraction:.1%} of the model, '
        f"{format_count(node.numel)} elements · bar = share of this module, bytes counted once; "
        f"hatched = read here, counted under another name</span>"
    )
    return f'{_MEMORY_CSS}<div class="tvt-mem"><div>{head}</div>{"".join(rows)}</div>'


def _bar_row(name: str, kind: str, nbytes: int, shared: int, scale: int) -> str:
    own = f'<i style="width:{100 * nbytes / scale:.2f}%"></i>'
    hatch = f'<i class="sh" style="width:{100 * shared / scale:.2f}%"></i>' if shared else ""
    label = f"{name} <span class='muted'>{kind}</span>" if kind else name
    return (
        f'<div class="row"><span>{label}</span><span class="bar">{own}{hatch}</span>'
        f'<span class="num">{format_bytes(nbytes)}</span><span class="num">{100 * nbytes / scale:.1f}%</span></div>'
    )
