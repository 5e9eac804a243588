# urljoin of a base and a run-time reference: the result is not a template.
import gatehouse
import sys
from urllib.parse import urljoin

gatehouse.post("erp", urljoin("/invoices/", sys.argv[1]))
