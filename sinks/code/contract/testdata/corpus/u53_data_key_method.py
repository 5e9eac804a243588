# A method looked up in a table by a run-time key, with a fallback computed at run time.
import gatehouse
import sys

METHODS = {"read": "GET", "write": "POST"}
method = METHODS.get(sys.argv[1], sys.argv[1])
gatehouse.call("erp", method, "/records")
