# Callbacks given to sorted and map are followed.
import gatehouse

r = gatehouse.get("erp", "/invoices")
by_due = sorted(r.body, key=lambda inv: inv["due"])
ids = list(map(lambda inv: inv["id"], by_due))
for i in ids[:5]:
    gatehouse.post("erp", f"/invoices/{i}/remind")
