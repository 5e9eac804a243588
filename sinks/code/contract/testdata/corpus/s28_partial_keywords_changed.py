# Soundness probe: a functools.partial's keywords changed after it is made.
import functools, gatehouse
p = functools.partial(gatehouse.call, "erp", "POST", path="/invoices")
p.keywords["path"] = "/payments"
p()
