# The client's internals.
import gatehouse

gatehouse._send({"provider": "erp", "method": "DELETE", "path": "/x"})
