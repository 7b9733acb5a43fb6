"""The explorer layer: the ipywidgets explorer (``tv.explore``) over the diagrams.

Maps control state to Diagram options and shows what the renderers draw, plus the save check.
The top of the import graph below the facade.
"""
