# A table of operations walked in a loop: each entry is followed on its own.
import gatehouse

OPERATIONS = [
    ("GET", "/invoices"),
    ("GET", "/suppliers"),
    ("POST", "/sync"),
]

for method, path in OPERATIONS:
    gatehouse.call("erp", method, path)
