# Soundness probe: hasattr reads the attribute, so a property runs.
import gatehouse
class Lazy:
    @property
    def ready(self):
        gatehouse.delete("erp", "/probe")
        return True
if hasattr(Lazy(), "ready"):
    pass
