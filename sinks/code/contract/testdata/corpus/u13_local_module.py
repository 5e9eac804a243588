# A helper module beside the program: the reader does not follow it.
# files: helpers.py
import gatehouse
import helpers

helpers.pay(gatehouse, "INV-7")
