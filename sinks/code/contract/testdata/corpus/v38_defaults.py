# Default arguments supply the method and the provider.
import gatehouse
import sys


def send(path, method="GET", provider="erp"):
    return gatehouse.call(provider, method, path)


send("/invoices")
send("/payments", "POST")
send("/tickets/" + sys.argv[1], provider="helpdesk")
