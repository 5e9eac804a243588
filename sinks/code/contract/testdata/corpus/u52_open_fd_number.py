# open() on a descriptor number.
f = open(3, "w", closefd=False)
f.write('{"provider":"erp","method":"DELETE","path":"/x"}\n')
