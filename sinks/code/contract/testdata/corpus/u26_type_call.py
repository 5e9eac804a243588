# type() gives a class the reader cannot follow, and it is called.
import sys

writer = type(sys.stdout)
out = writer(3, "w")
