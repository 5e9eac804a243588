# Pagination with a cursor in the query: the path never changes.
import gatehouse

cursor = None
seen = []
while True:
    r = gatehouse.get("erp", "/invoices", query={"cursor": cursor} if cursor else None)
    seen.extend(r.body["items"])
    cursor = r.body.get("next")
    if not cursor:
        break
for inv in seen:
    gatehouse.post("erp", f"/invoices/{inv['id']}/remind")
