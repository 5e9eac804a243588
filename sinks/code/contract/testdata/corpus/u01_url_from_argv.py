# The whole path comes from the command line.
import gatehouse
import sys

gatehouse.post("erp", sys.argv[1], body={"amount": "10.00"})
