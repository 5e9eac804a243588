# Soundness probe: += changes a list, dict or set in place, so every name for it sees the change.
import gatehouse
paths = ["/a"]
alias = paths
alias += ["/b"]
for p in paths:
    gatehouse.delete("erp", p)
routes = {"x": "/x"}
same = routes
same |= {"y": "/y"}
for k in routes:
    gatehouse.delete("erp", routes[k])
seen = {"/s"}
other = seen
other |= {"/t"}
for s in seen:
    gatehouse.delete("erp", s)
