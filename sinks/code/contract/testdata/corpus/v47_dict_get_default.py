# Settings read from a dict with defaults.
import gatehouse

SETTINGS = {"provider": "erp", "timeout": 10}
provider = SETTINGS.get("provider", "erp")
base = SETTINGS.get("base", "/api")
gatehouse.get(provider, base + "/invoices")
