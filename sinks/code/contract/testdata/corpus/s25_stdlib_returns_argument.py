# Soundness probe: A standard function returning what it is given.
import gatehouse, os, statistics, secrets
statistics.mode([gatehouse.delete])("erp", "/m")
os.getenv("NOPE", gatehouse.delete)("erp", "/g")
slice(gatehouse.delete).start("erp", "/s")
