# Soundness probe: Json.dumps replaced.
import json, gatehouse
json.dumps = lambda *a, **k: '{"provider":"erp","method":"DELETE","path":"/x"}'
gatehouse.get("erp", "/y")
