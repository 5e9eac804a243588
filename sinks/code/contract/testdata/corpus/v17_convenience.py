# The client's method helpers.
import gatehouse

gatehouse.get("erp", "/invoices")
gatehouse.head("erp", "/invoices")
gatehouse.post("erp", "/invoices")
gatehouse.put("erp", "/invoices/INV-1")
gatehouse.patch("erp", "/invoices/INV-1")
gatehouse.delete("erp", "/invoices/INV-1")
gatehouse.options("erp", "/invoices")
