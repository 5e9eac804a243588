# A dispatcher on a parameter: each call site follows only its own branch.
import gatehouse
import sys


def request(method, path, body=None):
    if method == "get":
        return gatehouse.get("erp", path)
    elif method == "post":
        return gatehouse.post("erp", path, body=body)
    elif method == "delete":
        return gatehouse.delete("erp", path)
    raise ValueError(method)


inv = request("get", "/invoices/" + sys.argv[1])
request("post", "/payments", body={"invoice": sys.argv[1]})
