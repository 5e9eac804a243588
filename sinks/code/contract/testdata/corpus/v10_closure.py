# A closure over a base path, made by a factory.
import gatehouse


def client(base):
    def send(method, rel, **kw):
        return gatehouse.call("erp", method, base + rel, **kw)
    return send


erp = client("/api/v1")
erp("GET", "/invoices")
erp("POST", "/payments", body={"amount": "5.00"})
