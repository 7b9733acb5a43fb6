"""The module tree as static HTML: collapsible with no JavaScript (a checkbox and CSS, as
xarray's HTML repr does), every user string escaped, colours from JupyterLab's ``--jp-*``
variables with fallbacks, so a saved notebook shows it on GitHub and in VS Code too.

The tree stays inside its output: long names and marks wrap within their columns (never past
the right edge); an output narrower than the columns' minimum (about 700 px) scrolls sideways
inside the tree's own box.

Each row: name and class, a bar as wide as the module's share of the model (hatched when its
tensors read bytes counted elsewhere), bytes counted once, %, elements, dtypes and marks.

>>> import torch, tensorviz as tv
>>> html_text = tree_html(tv.analyze({"<b>.w": torch.zeros(2)}).tree())
>>> "&lt;b&gt;" in html_text and "<b>" not in html_text and "<script" not in html_text
True
"""

from __future__ import annotations

import html
import itertools
from typing import TYPE_CHECKING

from tensorviz.core.categories import category_words
from tensorviz.core.names import shown
from tensorviz.core.tree import RELATION_WORDS, alike_runs, format_count, unpacked_words
from tensorviz.core.units import format_bytes

if TYPE_CHECKING:
    from tensorviz.core.tree import ModelTree, Node

__all__ = ["tree_html", "TREE_CSS", "MAX_CHILDREN"]

#: Most children written under one node; the rest are summed on one row.
MAX_CHILDREN = 200

_IDS = itertools.count()

TREE_CSS = """
.tvt{font-family:var(--jp-code-font-family,monospace);font-size:12px;color:var(--jp-content-font-color1,#222);
 max-width:100%;overflow-x:auto;box-sizing:border-box;}
.tvt ul{list-style:none;margin:0;padding-left:0;}
.tvt li{margin:0;}
.tvt input{display:none;}
.tvt input~ul{display:none;}
.tvt input:checked~ul{display:block;}
.tvt label,.tvt .tvt-leaf{display:grid;grid-template-columns:minmax(10em,320px) 120px 78px 58px 56px minmax(12em,1fr);
 column-gap:8px;align-items:center;cursor:default;}
.tvt label>span,.tvt .tvt-leaf>span{min-width:0;overflow-wrap:anywhere;}
.tvt .tvt-num{white-space:nowrap;}
.tvt label{cursor:pointer;}
.tvt label>span:first-child:before{content:"\\25B8 ";color:var(--jp-content-font-color2,#666);}
.tvt input:checked+label>span:first-child:before{content:"\\25BE ";}
.tvt .tvt-kind{color:var(--jp-content-font-color2,#666);}
.tvt .tvt-bar{height:9px;background:var(--jp-layout-color3,#ddd);position:relative;}
.tvt .tvt-bar>i{display:inline-block;height:100%;vertical-align:top;background:var(--jp-brand-color1,#1976d2);}
.tvt .tvt-bar>i.tvt-shared{background:repeating-linear-gradient(45deg,#e65100 0 3px,transparent 3px 6px);}
.tvt .tvt-num{text-align:right;}
.tvt .tvt-mark{color:var(--jp-warn-color0,#b45309);}
.tvt .tvt-skip{color:var(--jp-error-color1,#b71c1c);}
"""


def tree_html(tree: ModelTree, open_depth: int = 1) -> str:
    """The tree as an HTML fragment (inline ``<style>``); nodes above ``open_depth`` start open."""
    uid = f"tvt{next(_IDS)}"
    head = (
        '<div class="tvt-head">module tree · bytes counted once (each under the first name that '
        "reads them; ↔ marks names sharing bytes) · bar = share of the model</div>"
    )
    body = _node(tree.root, uid, open_depth, tree.total_nbytes)
    return f'<div class="tvt"><style>{TREE_CSS}</style>{head}<ul>{body}</ul></div>'


def _node(node: Node, uid: str, open_depth: int, total: int) -> str:
    cells = _cells(node, total)
    if not node.children:
        return f'<li><div class="tvt-leaf">{cells}</div></li>'
    ident = f"{uid}-{next(_IDS)}"
    checked = " checked" if node.depth < open_depth else ""
    runs = alike_runs(node.children)
    inner = "".join(_run(run, uid, open_depth, total) for run in runs[:MAX_CHILDREN])
    rest = [c for run in runs[MAX_CHILDREN:] for c in run]
    if rest:
        nbytes = sum(c.nbytes for c in rest)
        inner += (
            f'<li><div class="tvt-leaf"><span style="{_indent(node.depth + 1, True)}">… {len(rest):,} more</span>'
            f'<span></span><span class="tvt-num">{format_bytes(nbytes)}</span></div></li>'
        )
    return (
        f'<li><input type="checkbox" id="{ident}"{checked}/><label for="{ident}">{cells}</label><ul>{inner}</ul></li>'
    )


def _run(run: list[Node], uid: str, open_depth: int, total: int) -> str:
    """One child, or a run of alike ones (a transformer's layers) as one row holding the first."""
    if len(run) == 1:
        return _node(run[0], uid, open_depth, total)
    first, ident = run[0], f"{uid}-{next(_IDS)}"
    nbytes = sum(n.nbytes for n in run)
    label = f"{first.name} … {run[-1].name} · {len(run)} × {first.kind}"
    cells = (
        f'<span style="{_indent(first.depth, False)}">{html.escape(label)}</span>'
        f'<span class="tvt-bar"><i style="width:{100 * nbytes / total if total else 0:.2f}%"></i></span>'
        f'<span class="tvt-num">{format_bytes(nbytes)}</span>'
        f'<span class="tvt-num">{sum(n.fraction for n in run):.1%}</span>'
        f'<span class="tvt-num">{format_count(sum(n.numel for n in run))}</span>'
        f'<span class="tvt-kind">{format_bytes(first.nbytes)} each; one shown</span>'
    )
    return (
        f'<li><input type="checkbox" id="{ident}"/><label for="{ident}">{cells}</label>'
        f"<ul>{_node(first, uid, open_depth, total)}</ul></li>"
    )


def _indent(depth: int, leaf: bool) -> str:
    return f"padding-left:{14 * depth + 12 * leaf}px"


def _e(text: str) -> str:
    """Escaped for HTML, controls shown as escapes and long text elided (names are data)."""
    return html.escape(shown(text))


def _breakable(name: str) -> str:
    """A name, escaped, that wraps after a "." or "_" (``<wbr>``) before it wraps mid-word."""
    return _e(name).replace(".", ".<wbr>").replace("_", "_<wbr>")


def _cells(node: Node, total: int) -> str:
    e = _e
    name = f'<span style="{_indent(node.depth, not node.children)}">{_breakable(node.name)}'
    if node.kind and not node.is_tensor:
        name += f' <span class="tvt-kind">{e(node.kind)}</span>'
    name += "</span>"
    if node.kind == "skipped":
        return f'{name}<span></span><span class="tvt-skip">skipped: {e(node.reason)}</span>'
    what = ", ".join(node.dtypes)
    if node.view is not None:
        what = f"{node.view.dtype}[{', '.join(map(str, node.view.shape))}]"
        if node.kind.startswith("buffer"):
            what += f" {node.kind}"
    return (
        f"{name}{_bar(node, total)}"
        f'<span class="tvt-num">{format_bytes(node.nbytes)}</span>'
        f'<span class="tvt-num">{node.fraction:.1%}</span>'
        f'<span class="tvt-num">{format_count(node.numel)}</span>'
        f"<span>{e(what + unpacked_words(node))}{_categories(node)}{_mark(node)}</span>"
    )


def _categories(node: Node) -> str:
    """Training state: what the bytes of a module (or a parameter with its state) are."""
    if len(node.categories) < 2:
        return ""
    return f' <span class="tvt-kind">{html.escape(category_words(node.categories))}</span>'


def _bar(node: Node, total: int) -> str:
    """Solid: the share of the model counted here; hatched after it: bytes read here but
    counted under another name (a tied weight is all hatch)."""
    elsewhere = node.shared_nbytes
    if node.counted_in and node.view is not None:
        elsewhere = max(elsewhere, node.view.footprint_nbytes - node.nbytes)
    own = f'<i style="width:{100 * node.fraction:.2f}%"></i>'
    hatch = f'<i class="tvt-shared" style="width:{100 * elsewhere / total:.2f}%"></i>' if elsewhere and total else ""
    return f'<span class="tvt-bar">{own}{hatch}</span>'


def _mark(node: Node) -> str:
    e = html.escape
    if node.counted_in:
        relation, owner = node.counted_in
        where = "counted there" if node.nbytes == 0 else f"{format_bytes(node.nbytes)} counted here"
        text = f"↔ {RELATION_WORDS.get(relation, relation)} {owner} ({where})"
    elif node.partners:
        more = f", … {len(node.partners) - 3} more" if len(node.partners) > 3 else ""
        text = f"↔ shared with {', '.join(node.partners[:3])}{more}"
    elif node.shared_nbytes:
        text = f"↔ reads {format_bytes(node.shared_nbytes)} counted elsewhere"
    else:
        text = ""
    skipped = (
        f' <span class="tvt-skip">({node.nskipped} skipped)</span>' if node.nskipped and not node.is_tensor else ""
    )
    return (f' <span class="tvt-mark">{e(text)}</span>' if text else "") + skipped
