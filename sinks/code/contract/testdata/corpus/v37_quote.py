# A run-time value quoted into a segment.
import gatehouse
import sys
from urllib.parse import quote, urlencode

name = quote(sys.argv[1], safe="")
gatehouse.get("crm", f"/contacts/by-name/{name}")
gatehouse.get("crm", "/contacts?" + urlencode({"q": sys.argv[1]}))
