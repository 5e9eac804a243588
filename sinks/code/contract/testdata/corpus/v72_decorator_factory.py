# A decorator factory prefixing the path a function returns.
import gatehouse
def make(prefix):
    def wrap(fn):
        def inner(*a):
            return gatehouse.post("erp", prefix + fn(*a))
        return inner
    return wrap
@make("/api")
def invoice_path(i):
    return f"/invoices/{i}"
invoice_path("INV-1")
