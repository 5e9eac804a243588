# Soundness probe: Escaped gen send.
import gatehouse
def g():
    f = yield
    f("erp", "DELETE", "/x")
it = g()
next(it)
it.send(gatehouse.call)
