# Handlers chosen at run time from a dict of functions: every handler is in the contract.
import gatehouse
import sys


def pay(invoice):
    return gatehouse.post("erp", f"/invoices/{invoice}/pay")


def void(invoice):
    return gatehouse.post("erp", f"/invoices/{invoice}/void")


HANDLERS = {"pay": pay, "void": void}
HANDLERS[sys.argv[1]](sys.argv[2])
