# Soundness probe: Str.format attribute access.
import gatehouse
"{0.__globals__}".format(gatehouse.call)
