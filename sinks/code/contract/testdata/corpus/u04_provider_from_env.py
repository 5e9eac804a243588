# The provider comes from the environment.
import gatehouse
import os

gatehouse.post(os.environ.get("PROVIDER", "erp"), "/payments")
