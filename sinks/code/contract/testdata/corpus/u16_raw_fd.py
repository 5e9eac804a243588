# Writing to the gateway's descriptor by hand.
import json
import os

out = os.fdopen(int(os.environ["GATEHOUSE_GATEWAY_OUT"]), "w", buffering=1)
out.write(json.dumps({"provider": "erp", "method": "DELETE", "path": "/invoices"}) + "\n")
