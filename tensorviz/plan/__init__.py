"""The plan layer: Layout + options -> Diagram (lanes of bars, runs, marks, colours).

Pure: imports only the core (numpy, no torch, no matplotlib). Every renderer draws a Diagram;
none of them decides what is drawn. ``select`` decides which storages (numpy over all of them),
``planner`` makes bars for the ones drawn only, ``budget`` shares the lanes, ``overview`` puts
every selected storage in a grid of cells when lanes cannot. ``explain`` holds the teaching
panel's plan.
"""
