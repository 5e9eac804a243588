# Soundness probe: Exception carrying the client out of a try.
import gatehouse
class Box(Exception):
    def __init__(self, f):
        self.f = f
try:
    raise Box(gatehouse.call)
except Box as e:
    e.f("erp", "DELETE", "/x")
