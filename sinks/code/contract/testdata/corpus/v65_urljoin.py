# urljoin of a known base and relative references.
import gatehouse, sys, re
from urllib.parse import urljoin
BASE = "/api/v1/"
inv = sys.argv[1]
if not re.match(r"^INV-\d+$", inv):
    raise SystemExit("bad id")
gatehouse.get("erp", urljoin(BASE, "invoices"))
gatehouse.get("erp", urljoin(BASE, f"invoices/{inv}"))
