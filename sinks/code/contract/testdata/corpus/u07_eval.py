# eval of text: the reader cannot see what it runs.
import gatehouse

expr = "gatehouse.delete('erp', '/invoices')"
eval(expr)
