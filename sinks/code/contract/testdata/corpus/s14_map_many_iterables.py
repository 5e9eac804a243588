# Soundness probe: Map with multiple iterables.
import gatehouse
list(map(gatehouse.call, ["erp"], ["DELETE"], ["/m"]))
