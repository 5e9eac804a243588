# Soundness probe: contextlib.closing calls close() when the block ends.
import contextlib, gatehouse
class Conn:
    def close(self):
        gatehouse.delete("erp", "/session")
with contextlib.closing(Conn()) as c:
    pass
