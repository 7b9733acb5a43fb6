"""The render layer: draws a :class:`~tensorviz.plan.diagram.Diagram` with one of its back-ends --
matplotlib (the :mod:`.mpl` package: the diagram, its layers, words, overview, byte axis and
figure, and the teaching panel), text (:mod:`.text`), static HTML (the :mod:`.html` package:
a diagram, the module tree) or an inline SVG that reads the notebook's theme (:mod:`.theme`);
:mod:`.explain` and :mod:`.explain_view` make the teaching figures, :mod:`.diff` two layouts side
by side, :mod:`.show` bundles a picture + HTML for notebooks.

May import the core, the plan and the sources. Importing this package imports no matplotlib.
"""
