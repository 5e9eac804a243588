# str.format with automatic, numbered and named fields; {} segments become placeholders.
import gatehouse
import sys

supplier = sys.argv[1]
gatehouse.get("erp", "/suppliers/{}".format(supplier))
gatehouse.get("erp", "/suppliers/{0}/contacts/{1}".format(supplier, sys.argv[2]))
gatehouse.put("erp", "/suppliers/{sid}/bank".format(sid=supplier), body={"iban": sys.argv[3]})
