# A method in lower case, normalised, is still known.
import gatehouse

method = "post"
method = method.upper()
gatehouse.call("erp", method, "/payments")
gatehouse.call("erp", "put", "/settings")
