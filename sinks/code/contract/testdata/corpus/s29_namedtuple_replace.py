# Soundness probe: a NamedTuple's field replaced with _replace, and read back with _asdict.
import gatehouse
from typing import NamedTuple
class Route(NamedTuple):
    method: str
    path: str
r = Route("GET", "/invoices")
r2 = r._replace(method="DELETE", path="/invoices/all")
gatehouse.call("erp", r2.method, r2.path)
d = r2._asdict()
gatehouse.call("erp", d["method"], d["path"])
