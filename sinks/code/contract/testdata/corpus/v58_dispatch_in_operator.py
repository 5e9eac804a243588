# A method checked against a known set before use.
import gatehouse
import sys

method = sys.argv[1].upper()
if method in ("GET", "HEAD"):
    gatehouse.call("erp", method, "/status")
