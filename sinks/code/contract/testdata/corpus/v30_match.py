# A match statement on a constant: only the case it takes.
import gatehouse

COMMAND = "refund"

match COMMAND:
    case "pay":
        gatehouse.post("erp", "/payments")
    case "refund" | "chargeback":
        gatehouse.post("erp", "/refunds")
    case _:
        gatehouse.delete("erp", "/payments")
