# Soundness probe: Python's // rounds toward minus infinity, also with a negative divisor.
import gatehouse
paths = ["/a", "/b", "/c", "/d"]
gatehouse.delete("erp", paths[7 // -2])
