"""The render layer: draws a :class:`~tensorviz.plan.diagram.Diagram` -- matplotlib (:mod:`.mpl`),
text (:mod:`.text`), static HTML (:mod:`.html`) -- and the teaching panel (:mod:`.panel`,
:mod:`.explain`); :mod:`.show` bundles PNG + HTML for notebooks.

May import the core, the plan and the sources. Importing this package imports no matplotlib.
"""
