# A typed integration: dataclass, annotations, logging, retries, template constants with .format.
from __future__ import annotations
import logging, json, sys, time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Dict, List, Optional
import gatehouse

log = logging.getLogger(__name__)
ERP = "erp"
INVOICE_PATH = "/invoices/{id}"
PAY_PATH = "/invoices/{id}/payments"

@dataclass
class Payment:
    invoice: str
    amount: Decimal
    tags: List[str] = field(default_factory=list)

def fetch(inv_id: str) -> Dict[str, Any]:
    r = gatehouse.get(ERP, INVOICE_PATH.format(id=inv_id))
    assert r.status == 200, r.body
    return r.body

def pay(p: Payment, retries: int = 3) -> Optional[dict]:
    for attempt in range(retries):
        try:
            return gatehouse.post(ERP, PAY_PATH.format(id=p.invoice), body={"amount": str(p.amount)}).body
        except gatehouse.Error as e:
            log.warning("attempt %d failed: %s", attempt, e)
            time.sleep(0.1 * attempt)
    return None

def main(argv: List[str]) -> int:
    inv = fetch(argv[1])
    if Decimal(inv["amount_due"]) <= 0:
        print(json.dumps({"skipped": inv["id"]}))
        return 0
    pay(Payment(inv["id"], Decimal(inv["amount_due"])))
    return 0

if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
