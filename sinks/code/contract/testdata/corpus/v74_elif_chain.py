# An elif chain setting method and path together: each pair is kept.
import gatehouse, sys
action = sys.argv[1]
if action == "pay":
    method, path = "POST", "/payments"
elif action == "refund":
    method, path = "POST", "/refunds"
else:
    method, path = "GET", "/status"
gatehouse.call("erp", method, path)
