# The request comes on stdin; its values become placeholders.
import gatehouse
import json
import sys

req = json.load(sys.stdin)
sup = req["supplier"]
gatehouse.get("erp", f"/suppliers/{sup['id']}")
gatehouse.post("erp", "/payments", body={"supplier": sup["id"], "amount": req["amount"]})
