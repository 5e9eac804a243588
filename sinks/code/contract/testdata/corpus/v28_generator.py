# A generator yields the paths a loop then calls.
import gatehouse


def paths():
    for kind in ("invoices", "orders"):
        yield f"/{kind}/export"


for p in paths():
    gatehouse.post("erp", p)
