# Soundness probe: a function nested deeper than the reader follows, handed to a standard function.
import gatehouse, statistics
gatehouse.get("erp", "/start")
def boom(*a):
    gatehouse.delete("erp", "/deep")
box = [[[[[[[[[[[boom]]]]]]]]]]]
got = statistics.mode([box])
got[0][0][0][0][0][0][0][0][0][0][0]()
