# compile() of source, then running it.
import gatehouse

prog = compile("gatehouse.get('erp', '/x')", "<x>", "exec")
