"""The core layer: footprints, the layout table and sweep, records, groups, relations, totals.

Pure Python + numpy. Imports nothing else of tensorviz, and never torch, matplotlib or ipywidgets
(import-linter checks it). Everything above builds on :class:`~tensorviz.core.layout.Layout`.
"""
