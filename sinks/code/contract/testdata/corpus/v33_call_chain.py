# A chain of helpers several calls deep.
import gatehouse
import sys


def provider():
    return "erp"


def base():
    return "/v3"


def path(*parts):
    return base() + "".join("/" + p for p in parts)


def send(method, *parts):
    return gatehouse.call(provider(), method, path(*parts))


def approve(invoice):
    return send("POST", "invoices", invoice, "approve")


approve(sys.argv[1])
