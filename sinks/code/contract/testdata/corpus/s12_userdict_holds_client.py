# Soundness probe: Dict subclass via collections.UserDict? (data class).
import collections, gatehouse
d = collections.UserDict()
d["f"] = gatehouse.call
d["f"]("erp", "DELETE", "/x")
