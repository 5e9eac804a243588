# Soundness probe: Env var redirect before first call has no effect on what is sent.
import os, gatehouse
os.environ["GATEHOUSE_GATEWAY_OUT"] = "1"
gatehouse.get("erp", "/x")
