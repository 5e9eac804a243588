# An Enum names the actions; the dispatcher cannot tell them apart, so both are in the contract.
import enum
import sys

import gatehouse


class Action(enum.Enum):
    APPROVE = "approve"
    REJECT = "reject"


def act(action, invoice):
    if action is Action.APPROVE:
        return gatehouse.post("erp", f"/invoices/{invoice}/approve")
    return gatehouse.post("erp", f"/invoices/{invoice}/reject")


act(Action(sys.argv[1]), sys.argv[2])
