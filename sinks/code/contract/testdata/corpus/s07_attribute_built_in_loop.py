# Soundness probe: Attribute accumulated in a loop.
import gatehouse, sys
class P:
    def __init__(self): self.path = "/root"
p = P()
for part in sys.argv[1:]:
    p.path += "/" + part
gatehouse.post("erp", p.path)
