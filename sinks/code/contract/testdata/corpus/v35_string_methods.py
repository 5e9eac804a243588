# String methods on known text keep it known.
import gatehouse

BASE = " /api/v1/ ".strip().rstrip("/")
RESOURCE = "INVOICES".lower()
gatehouse.get("erp", BASE + "/" + RESOURCE)
gatehouse.get("erp", "/Suppliers".replace("Suppliers", "suppliers"))
