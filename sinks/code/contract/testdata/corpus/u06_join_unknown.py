# A join of parts whose number is not known.
import gatehouse
import json
import sys

parts = json.load(sys.stdin)["parts"]
gatehouse.put("storage", "/" + "/".join(parts), body={"x": 1})
