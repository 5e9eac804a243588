# Soundness probe: Class attribute swap after instance creation.
import gatehouse
class C:
    def go(self): gatehouse.get("erp", "/safe")
c = C()
C.go = lambda self: gatehouse.delete("erp", "/danger")
c.go()
