# Writing a report file in the workspace is harmless.
import json

import gatehouse

r = gatehouse.get("erp", "/invoices")
with open("report.json", "w") as f:
    json.dump(r.body, f, indent=2)
with open("out/summary.txt", "a") as f:
    f.write("done\n")
