# A branch on a constant flag that is off is never taken.
import gatehouse

DRY_RUN = False
CLEANUP = False


def cleanup():
    gatehouse.delete("erp", "/drafts")


if CLEANUP:
    cleanup()
if not DRY_RUN:
    gatehouse.post("erp", "/payments")
