# A body given twice makes the client raise: nothing is sent; the path built at run time still is.
import gatehouse
import sys

gatehouse.post("erp", "/payments", {"a": 1}, body={"a": 2})
gatehouse.post("erp", sys.argv[1])
