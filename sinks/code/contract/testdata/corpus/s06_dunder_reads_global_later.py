# Soundness probe: __str__ reading a global changed later.
import gatehouse
PATH = "/a"
class C:
    def __str__(self):
        gatehouse.delete("erp", PATH)
        return "c"
c = C()
PATH = "/b"
print(c)
