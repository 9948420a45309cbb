"""Named plot helpers, one module per lesson (``helpers.plots.position`` for lesson 4 ...).

Each helper draws on an ``ax`` it is given (or makes a pyplot figure when none is given, for a
notebook cell) and returns the artists it made, so explorers can update them in place.
"""
