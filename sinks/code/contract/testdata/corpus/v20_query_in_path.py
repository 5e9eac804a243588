# A query written into the path goes as the query: the template is the path alone.
import gatehouse
import sys

gatehouse.get("erp", "/invoices?status=open")
gatehouse.get("erp", f"/invoices?supplier={sys.argv[1]}&page=2")
