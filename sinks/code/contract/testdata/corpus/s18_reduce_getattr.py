# Soundness probe: Functools.reduce via getattr.
import functools, gatehouse
f = functools.reduce(getattr, ["delete"], gatehouse)
f("erp", "/r")
