# An integration whose entry is a function the runner calls with its input.
# entry: run
import gatehouse


def run(params):
    invoice = params["invoice"]
    inv = gatehouse.get("erp", f"/invoices/{invoice}").body
    return gatehouse.post("erp", "/payments", body={"invoice": invoice, "amount": inv["amount_due"]})
