# exec of a program built at run time.
import gatehouse
import sys

code = "gatehouse.post('erp', '/payments')\n" * int(sys.argv[1])
exec(code)
