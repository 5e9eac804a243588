# __getattr__ turns any attribute into a call.
import gatehouse


class Proxy:
    def __getattr__(self, name):
        return lambda *a: gatehouse.post("erp", "/" + name)


Proxy().payments()
