# Soundness probe: Generator frame.
def g():
    yield 1
x = g()
x.gi_frame.f_globals
