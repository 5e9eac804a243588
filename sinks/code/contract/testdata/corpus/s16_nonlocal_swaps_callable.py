# Soundness probe: Nonlocal reassign of a callable.
import gatehouse
def outer():
    f = gatehouse.get
    def swap():
        nonlocal f
        f = gatehouse.delete
    swap()
    f("erp", "/n")
outer()
