# A method chosen between two constants on run-time data: both are in the contract.
import gatehouse
import sys

exists = gatehouse.get("crm", f"/contacts/{sys.argv[1]}").status == 200
method = "PUT" if exists else "POST"
path = f"/contacts/{sys.argv[1]}" if exists else "/contacts"
gatehouse.call("crm", method, path, body={"name": sys.argv[2]})
