# A loop over a known tuple and a range.
import gatehouse

for kind in ("invoices", "credit-notes"):
    gatehouse.get("erp", "/" + kind)
for page in range(3):
    gatehouse.get("erp", "/archive", query={"page": page})
