# Soundness probe: Default mutable list.
import gatehouse
def add(f, bag=[]):
    bag.append(f)
    return bag
add(gatehouse.delete)
for f in add(print):
    f("erp", "/bag")
