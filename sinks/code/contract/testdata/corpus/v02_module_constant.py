# Module constants name the provider, the base path and the method.
import gatehouse

PROVIDER = "erp"
BASE = "/api/v2"
PAY = "POST"

gatehouse.call(PROVIDER, PAY, BASE + "/payments", body={"invoice": "INV-7"})
