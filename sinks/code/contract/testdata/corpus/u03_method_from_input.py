# The method comes from the input.
import gatehouse
import json
import sys

req = json.load(sys.stdin)
gatehouse.call("erp", req["method"], "/invoices/" + req["id"])
