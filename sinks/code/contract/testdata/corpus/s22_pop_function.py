# Soundness probe: List.pop of a function.
import gatehouse
fs = [gatehouse.get]
fs.insert(0, gatehouse.delete)
fs.pop(0)("erp", "/pop")
