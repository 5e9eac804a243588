# from module import *: the names are not seen.
from os import *
import gatehouse

gatehouse.get("erp", "/x")
