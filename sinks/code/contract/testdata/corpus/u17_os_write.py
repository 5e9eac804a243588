# os.write on descriptor 3.
import os

os.write(3, b'{"provider":"erp","method":"POST","path":"/payments"}\n')
