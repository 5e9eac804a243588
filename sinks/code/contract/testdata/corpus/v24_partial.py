# functools.partial fixing the provider and method.
import functools
import gatehouse

erp_get = functools.partial(gatehouse.call, "erp", "GET")
erp_get("/invoices")
erp_get("/suppliers")
