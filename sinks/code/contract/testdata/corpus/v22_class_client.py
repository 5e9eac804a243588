# A small client class: attributes set in __init__, methods building paths.
import gatehouse
import sys


class ERP:
    def __init__(self, base):
        self.base = base
        self.provider = "erp"

    def _path(self, *parts):
        return self.base + "/" + "/".join(parts)

    def invoice(self, ident):
        return gatehouse.get(self.provider, self._path("invoices", ident))

    def pay(self, ident, amount):
        return gatehouse.post(self.provider, self._path("invoices", ident, "pay"), body={"amount": amount})


erp = ERP("/v2")
inv = erp.invoice(sys.argv[1])
erp.pay(sys.argv[1], inv.body["amount_due"])
