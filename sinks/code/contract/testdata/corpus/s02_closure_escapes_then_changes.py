# Soundness probe: Closure escaped into data, outer var changed later.
import gatehouse, json
def outer():
    base = "/a"
    f = lambda: gatehouse.post("erp", base)
    d = json.loads("{}")
    d["f"] = f
    base = "/b"
    d["f"]()
outer()
