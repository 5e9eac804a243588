# The start of the path from the environment.
import gatehouse
import os

BASE = os.environ["ERP_BASE"]
gatehouse.post("erp", f"{BASE}/payments")
