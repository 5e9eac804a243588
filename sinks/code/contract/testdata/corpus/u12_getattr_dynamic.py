# A client function chosen by a name computed at run time.
import gatehouse
import sys

send = getattr(gatehouse, sys.argv[1])
send("erp", "/invoices")
