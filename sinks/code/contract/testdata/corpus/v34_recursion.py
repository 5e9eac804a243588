# A recursive helper walking pages: the path is the same at every depth.
import gatehouse


def fetch_all(page=1):
    r = gatehouse.get("erp", "/invoices", query={"page": page})
    if r.body.get("more"):
        return r.body["items"] + fetch_all(page + 1)
    return r.body["items"]


items = fetch_all()
