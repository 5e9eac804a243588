# A program that sends nothing has an empty, verified contract.
import json
import sys

data = json.loads(sys.stdin.read() or "{}")
print(json.dumps({"count": len(data)}))
