# Comprehensions over run-time data build calls and paths.
import gatehouse
import json
import sys

ids = json.loads(sys.stdin.read())["ids"]
paths = [f"/invoices/{i}" for i in ids]
invoices = [gatehouse.get("erp", p).body for p in paths]
totals = {inv["id"]: inv["total"] for inv in invoices}
print(sum(float(t) for t in totals.values()))
