# Method and path set together in a branch stay together.
import gatehouse, sys
method = "GET"
path = "/invoices"
if len(sys.argv) > 2:
    method = "POST"
    path = "/invoices/" + sys.argv[1] + "/pay"
gatehouse.call("erp", method, path)
