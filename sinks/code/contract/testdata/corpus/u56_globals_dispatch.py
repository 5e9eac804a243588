# A handler looked up in globals() by a name built at run time.
import gatehouse, sys
def do_pay(inv): gatehouse.post("erp", f"/invoices/{inv}/pay")
def do_void(inv): gatehouse.post("erp", f"/invoices/{inv}/void")
action = sys.argv[1]
handler = globals().get(f"do_{action}")
handler(sys.argv[2])
