# Soundness probe: Sorted calls __lt__ of instances.
import gatehouse
class K:
    def __init__(self, v): self.v = v
    def __lt__(self, other):
        gatehouse.delete("erp", "/lt")
        return True
sorted([K(1), K(2)])
