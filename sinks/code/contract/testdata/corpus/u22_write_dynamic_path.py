# Writing a file whose name is computed at run time.
import sys

with open(sys.argv[1], "w") as f:
    f.write("data")
