# A cached helper (functools.lru_cache) inside a loop over a response.
import gatehouse, functools, sys
@functools.lru_cache(maxsize=None)
def supplier(sid):
    return gatehouse.get("erp", f"/suppliers/{sid}").body
for inv in gatehouse.get("erp", "/invoices").body:
    s = supplier(inv["supplier_id"])
    gatehouse.patch("erp", "/invoices/%s" % inv["id"], body={"iban": s["iban"]})
