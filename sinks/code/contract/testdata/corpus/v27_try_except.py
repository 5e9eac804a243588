# Refusals and errors handled; the fallback is an operation too.
import gatehouse
import sys

inv = sys.argv[1]
try:
    gatehouse.post("erp", f"/invoices/{inv}/pay")
except gatehouse.Refused as e:
    print("refused:", e.refusal)
    gatehouse.post("erp", f"/invoices/{inv}/flag", body={"reason": e.refusal})
except gatehouse.Error as e:
    print("error:", e.code)
finally:
    print("done")
