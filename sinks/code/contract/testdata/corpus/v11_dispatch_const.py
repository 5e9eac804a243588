# A dispatcher on a module constant: only the branch it takes is in the contract.
import gatehouse

ACTION = "remind"

if ACTION == "pay":
    gatehouse.post("erp", "/payments")
elif ACTION == "remind":
    gatehouse.post("erp", "/reminders")
else:
    gatehouse.delete("erp", "/invoices")
