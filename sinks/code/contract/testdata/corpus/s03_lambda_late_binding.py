# Soundness probe: Lambdas in a comprehension read the loop variable late.
import gatehouse
fs = [lambda: gatehouse.delete("erp", p) for p in ("/a", "/b")]
for f in fs:
    f()
