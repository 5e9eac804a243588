# Soundness probe: dict.fromkeys, called through the class or a dict, iterates its keys and fills in its value.
import gatehouse
gatehouse.get("erp", "/start")
def keys():
    gatehouse.delete("erp", "/keys")
    yield "k"
dict.fromkeys(keys())
dict.fromkeys(["a"], gatehouse.delete)["a"]("erp", "/value")
{}.fromkeys(["b"])
gatehouse.delete("erp", "/after")
