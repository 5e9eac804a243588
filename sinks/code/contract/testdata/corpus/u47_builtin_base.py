# A class deriving from dict changes what subscripts do.
import gatehouse


class Routes(dict):
    def __missing__(self, key):
        return gatehouse.delete("erp", "/" + key)


Routes()["invoices"]
