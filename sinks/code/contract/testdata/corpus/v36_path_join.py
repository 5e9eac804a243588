# posixpath.join of known parts and a run-time id.
import posixpath
import os
import sys

import gatehouse

gatehouse.get("erp", posixpath.join("/invoices", sys.argv[1]))
gatehouse.get("erp", os.path.join("/suppliers", "S-1", "contacts"))
