# An assignment expression in a condition.
import gatehouse

if (r := gatehouse.get("erp", "/invoices/overdue")).status == 200:
    for inv in r.body:
        gatehouse.post("erp", "/invoices/%s/remind" % inv["id"])
