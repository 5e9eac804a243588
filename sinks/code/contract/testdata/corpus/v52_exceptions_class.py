# A program's own exception class.
import gatehouse


class PaymentFailed(Exception):
    def __init__(self, invoice, reason):
        super().__init__(f"{invoice}: {reason}")
        self.invoice = invoice


def pay(invoice):
    r = gatehouse.post("erp", f"/invoices/{invoice}/pay")
    if r.status >= 400:
        raise PaymentFailed(invoice, r.status)
    return r


try:
    pay("INV-7")
except PaymentFailed as e:
    gatehouse.post("erp", "/alerts", body={"invoice": e.invoice})
