# Reaching classes through dunder attributes.
import gatehouse

cls = ().__class__.__base__
for sub in cls.__subclasses__():
    print(sub)
