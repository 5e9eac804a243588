# A query built from dates, a loop with a limit from the input.
import gatehouse, json, sys, datetime
req = json.loads(sys.stdin.read())
since = (datetime.date.today() - datetime.timedelta(days=30)).isoformat()
invoices = gatehouse.get("erp", "/invoices", query={"since": since, "status": "overdue"}).body
for i, inv in enumerate(invoices):
    if i >= req.get("limit", 10):
        break
    gatehouse.post("erp", "/reminders", body={"invoice": inv["id"], "n": i})
print(json.dumps({"sent": min(len(invoices), req.get("limit", 10))}))
