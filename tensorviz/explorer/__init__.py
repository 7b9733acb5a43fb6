"""The explorer layer: the ipywidgets explorer (``tv.explore``) over the diagrams.

Maps control state to Diagram options and ships each Diagram to a browser canvas (an anywidget:
the ES modules ``canvas.js``, ``overview.js`` and ``geometry.js`` and the styles ``explorer.css``,
shipped as package data and linked by :mod:`.modules` with no build step), plus the save check.
The top of the import graph below the facade.
"""
