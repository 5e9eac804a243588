# A path that is nothing but a run-time value after the slash.
import gatehouse
import sys

gatehouse.delete("erp", "/" + sys.argv[1])
