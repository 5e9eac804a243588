# Helper functions called from the entry point, with arguments.
import gatehouse
import sys


def erp_path(*segments):
    return "/" + "/".join(segments)


def approve(invoice):
    return gatehouse.post("erp", erp_path("invoices", invoice, "approve"))


approve(sys.argv[1])
