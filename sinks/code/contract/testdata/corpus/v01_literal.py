# A literal call: the simplest contract.
import gatehouse

gatehouse.call("erp", "POST", "/payments", body={"invoice": "INV-7", "amount": "10.00"}, atom="erp.pay")
