# "/".join of a known list of parts.
import gatehouse
import sys

parts = ["", "invoices", sys.argv[1], "approve"]
gatehouse.post("erp", "/".join(parts))
