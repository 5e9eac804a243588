# Static and class methods build paths.
import gatehouse
import sys


class Paths:
    base = "/erp"

    @staticmethod
    def invoice(i):
        return f"/invoices/{i}"

    @classmethod
    def full(cls, rel):
        return cls.base + rel


gatehouse.get("erp", Paths.full(Paths.invoice(sys.argv[1])))
