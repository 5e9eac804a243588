# Routes in a dict looked up with a constant key.
import gatehouse

ROUTES = {
    "list": ("GET", "/invoices"),
    "create": ("POST", "/invoices"),
    "purge": ("DELETE", "/invoices"),
}

method, path = ROUTES["create"]
gatehouse.call("erp", method, path, body={"supplier": "S-1"})
