# A global switched by a function on run-time input: both values.
import gatehouse, sys
base = "/v1"
def get_base():
    global base
    return base
def switch():
    global base
    base = "/v2"
if sys.argv[1] == "new":
    switch()
gatehouse.delete("erp", get_base() + "/cache")
