# A method looked up with getattr by a name built at run time.
import gatehouse, sys
class Handlers:
    def do_pay(self, inv): gatehouse.post("erp", f"/invoices/{inv}/pay")
    def do_void(self, inv): gatehouse.post("erp", f"/invoices/{inv}/void")
h = Handlers()
getattr(h, "do_" + sys.argv[1])(sys.argv[2])
