# The body given positionally, to call and to the method helpers.
import gatehouse

gatehouse.call("erp", "POST", "/payments", {"invoice": "INV-7", "amount": "10.00"})
gatehouse.put("erp", "/suppliers/S-1", {"iban": "GB82WEST12345698765432"})
