"""Renderers of a :class:`~tensorviz.diagram.Diagram`: matplotlib (:mod:`.mpl`), text
(:mod:`.text`) and static HTML (:mod:`.html`). Importing this package imports no matplotlib."""
