# Following a "next" URL from a response: the path is computed at run time.
import gatehouse

r = gatehouse.get("erp", "/invoices")
while r.body.get("next"):
    r = gatehouse.get("erp", r.body["next"])
gatehouse.post("erp", r.body["archive_url"])
