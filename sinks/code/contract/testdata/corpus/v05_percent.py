# %-formatting, positional and by name.
import gatehouse
import sys

inv = sys.argv[1]
gatehouse.get("erp", "/invoices/%s" % inv)
gatehouse.post("erp", "/invoices/%(id)s/remind" % {"id": inv})
gatehouse.get("erp", "/suppliers/%s/invoices/%d" % (sys.argv[2], 7))
