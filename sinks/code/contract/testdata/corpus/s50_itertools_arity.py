# Soundness probe: itertools.starmap spreads each item into its function's arguments, accumulate gives it two.
import gatehouse, itertools
gatehouse.get("erp", "/start")
list(itertools.starmap(gatehouse.delete, [("erp", "/starmap")]))
list(itertools.accumulate(["erp", "/accumulate"], gatehouse.delete))
