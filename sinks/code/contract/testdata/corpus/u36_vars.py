# vars() of a module.
import gatehouse

for name, fn in vars(gatehouse).items():
    if name.startswith("p"):
        fn("erp", "/x")
