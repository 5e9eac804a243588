# Soundness probe: an exception keeps what it is given in args, read back after it is caught.
import gatehouse
class Oops(Exception):
    pass
try:
    raise Oops(gatehouse.delete)
except Oops as e:
    e.args[0]("erp", "/from-args")
