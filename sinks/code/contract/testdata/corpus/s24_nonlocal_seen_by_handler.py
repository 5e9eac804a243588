# Soundness probe: A nonlocal changed by a function that raises, seen by the handler.
import gatehouse
class Stop(Exception):
    pass
def outer():
    f = gatehouse.get
    def swap():
        nonlocal f
        f = gatehouse.delete
        raise Stop()
    try:
        swap()
    except Stop:
        f("erp", "/x")
outer()
