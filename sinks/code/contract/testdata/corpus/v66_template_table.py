# A table of path templates chosen by a checked action, a dry-run flag from the environment.
import gatehouse, os, sys
DRY_RUN = os.environ.get("DRY_RUN") == "1"
PATHS = {"approve": "/invoices/{id}/approve", "reject": "/invoices/{id}/reject"}
action = sys.argv[1] if len(sys.argv) > 1 else "approve"
inv = sys.argv[2] if len(sys.argv) > 2 else "INV-1"
if action not in PATHS:
    raise SystemExit(f"unknown action {action}")
path = PATHS[action].format(id=inv)
if DRY_RUN:
    print("would post", path)
else:
    gatehouse.post("erp", path)
