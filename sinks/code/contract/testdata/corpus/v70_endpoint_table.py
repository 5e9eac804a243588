# A dict of methods to lists of paths, walked in two loops.
import gatehouse, sys
ENDPOINTS = {
    "GET": ["/invoices", "/suppliers"],
    "POST": ["/payments"],
}
for method, paths in ENDPOINTS.items():
    for p in paths:
        gatehouse.call("erp", method, p)
