# The debugger runs what it reads.
import gatehouse

breakpoint()
gatehouse.get("erp", "/x")
