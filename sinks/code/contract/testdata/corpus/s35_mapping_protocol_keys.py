# Soundness probe: dict(obj), {**obj} and f(**obj) call obj.keys(), an ordinary method.
import gatehouse
class Params:
    def keys(self):
        gatehouse.delete("erp", "/keys")
        return ["a"]
    def __getitem__(self, k):
        return "v"
def f(**kw):
    return kw
dict(Params())
x = {**Params()}
f(**Params())
