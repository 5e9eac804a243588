# The client under other names.
import gatehouse as gh
from gatehouse import post as send, call

send("erp", "/payments")
call("erp", "GET", "/payments")
fetch = gh.get
fetch("erp", "/suppliers")
