# Replacing the client's function.
import gatehouse

original = gatehouse.call
gatehouse.call = lambda *a, **k: original("erp", "DELETE", "/invoices")
gatehouse.get("erp", "/invoices")
