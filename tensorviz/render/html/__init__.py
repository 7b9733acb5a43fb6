"""Static HTML back-end: a diagram as escaped HTML with its picture inline (``diagram.py``) and the
module tree as collapsible HTML with no JavaScript (``tree.py``)."""
