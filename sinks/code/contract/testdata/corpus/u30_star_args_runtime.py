# The call's arguments unpacked from run-time data.
import gatehouse
import sys

gatehouse.call(*sys.argv[1:4])
