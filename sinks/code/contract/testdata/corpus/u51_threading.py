# Threads: the reader does not follow them.
import threading

import gatehouse

t = threading.Thread(target=lambda: gatehouse.post("erp", "/payments"))
t.start()
