# Soundness probe: a set of text iterates in its hashes' order, which changes from run to run.
import gatehouse
for p in {"/first", "/second"}:
    target = p
    break
gatehouse.delete("erp", target)
