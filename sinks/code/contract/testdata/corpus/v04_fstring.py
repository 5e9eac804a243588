# f-strings: a run-time value becomes a placeholder named after it.
import gatehouse
import sys

invoice_id = sys.argv[1]
line = sys.argv[2]
gatehouse.call("erp", "GET", f"/invoices/{invoice_id}")
gatehouse.call("erp", "PATCH", f"/invoices/{invoice_id}/lines/{line}", body={"qty": 2})
