# Arguments unpacked from a known tuple and dict.
import gatehouse

ROUTE = ("erp", "POST", "/payments")
OPTIONS = {"body": {"amount": "3.00"}, "atom": "erp.pay"}
gatehouse.call(*ROUTE, **OPTIONS)
