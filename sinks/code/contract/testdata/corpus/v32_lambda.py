# Small lambdas as path builders and senders.
import gatehouse
import sys

invoice_path = lambda i: f"/invoices/{i}"
send = lambda p: gatehouse.post("erp", p + "/approve")
send(invoice_path(sys.argv[1]))
