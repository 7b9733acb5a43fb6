"""The explorer layer: the ipywidgets explorer (``tv.explore``) over the diagrams.

Maps control state to Diagram options and ships each Diagram to a browser canvas (an anywidget:
plain ES modules ``geometry.js`` + ``canvas.js`` shipped as package data), plus the save check.
The top of the import graph below the facade.
"""
