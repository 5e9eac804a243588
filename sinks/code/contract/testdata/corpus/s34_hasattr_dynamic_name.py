# Soundness probe: hasattr with a name read at run time runs whichever property it names.
import gatehouse, sys
class Lazy:
    @property
    def a(self):
        gatehouse.delete("erp", "/a")
        return True
hasattr(Lazy(), sys.argv[1])
