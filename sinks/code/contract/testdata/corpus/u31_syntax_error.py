# A program that does not parse.
import gatehouse

def broken(:
    gatehouse.get("erp", "/x")
