# Concatenation of constants and run-time text.
import gatehouse
import json
import sys

req = json.loads(sys.stdin.read())
gatehouse.post("crm", "/contacts/" + req["contact"] + "/notes", body={"text": req["note"]})
