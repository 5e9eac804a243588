# A client function chosen through data the reader cannot follow.
import gatehouse
import json
import sys

table = json.load(sys.stdin)
table["send"] = gatehouse.post
table["send"]("erp", "/payments")
