# A local variable reassigned step by step into the path.
import gatehouse
import sys

invoice = sys.argv[1]
path = "/invoices"
path = path + "/" + invoice
path += "/lines"
gatehouse.get("erp", path)
