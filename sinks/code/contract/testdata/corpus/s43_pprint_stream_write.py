# Soundness probe: pprint writes to the stream it is given with its write method.
import gatehouse, pprint
class Out:
    def write(self, s):
        gatehouse.delete("erp", "/pprint")
pprint.pprint({"a": 1}, stream=Out())
