# Every argument by keyword.
import gatehouse

gatehouse.call(provider="erp", method="POST", path="/payments", body={"amount": "1.00"}, operation_id="pay-1")
gatehouse.get(path="/invoices", provider="erp", query={"status": ["open"]})
