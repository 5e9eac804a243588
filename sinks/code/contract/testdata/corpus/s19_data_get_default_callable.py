# Soundness probe: Dict.get default with a callable.
import gatehouse, json, sys
cfg = json.loads("{}")
f = cfg.get("send", gatehouse.delete)
f("erp", "/g")
