# Soundness probe: Map calls its function while it is iterated.
import gatehouse
BASE = "/a"
m = map(lambda x: gatehouse.post("erp", BASE + x), ["/p"])
BASE = "/b"
list(m)
