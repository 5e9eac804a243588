# Soundness probe: the function a functools.partial holds, read back through .func and .args.
import functools, gatehouse
p = functools.partial(gatehouse.call, "erp")
p.func(p.args[0], "DELETE", "/partial-func")
