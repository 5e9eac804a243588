# A file beside the program shadows the json module (and the client imports json).
# files: json.py
import gatehouse

gatehouse.get("erp", "/invoices")
