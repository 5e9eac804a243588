# Soundness probe: Type(e).__name__ in a message is harmless.
import gatehouse
try:
    gatehouse.post("erp", "/payments")
except Exception as e:
    print(f"failed: {type(e).__name__}: {e}")
