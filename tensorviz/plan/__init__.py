"""The plan layer: Layout + options -> Diagram (lanes of bars, runs, marks, colours).

Pure: imports only the core (numpy, no torch, no matplotlib). Every renderer draws a Diagram;
none of them decides what is drawn. ``explain`` holds the teaching panel's plan.
"""
