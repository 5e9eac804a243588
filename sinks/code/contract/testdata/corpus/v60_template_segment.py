# A value inside a segment makes the whole segment a placeholder.
import gatehouse
import sys

gatehouse.get("erp", f"/invoices/INV-{sys.argv[1]}")
gatehouse.get("erp", "/reports/" + sys.argv[2] + ".pdf")
