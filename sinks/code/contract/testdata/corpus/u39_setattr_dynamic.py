# setattr with a computed name on the client.
import gatehouse
import sys

setattr(gatehouse, sys.argv[1], print)
gatehouse.post("erp", "/payments")
