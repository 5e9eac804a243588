# A path extended in a loop over run-time parts.
import gatehouse
import sys

path = "/files"
for part in sys.argv[1:]:
    path += "/" + part
gatehouse.delete("storage", path)
