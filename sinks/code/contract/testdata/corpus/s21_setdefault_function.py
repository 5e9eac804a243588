# Soundness probe: Setdefault of a function in tracked dict then call through values.
import gatehouse
h = {}
h.setdefault("x", gatehouse.delete)
for v in h.values():
    v("erp", "/sd")
