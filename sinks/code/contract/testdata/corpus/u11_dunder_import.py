# __import__ of the client under a computed name.
gh = __import__("gate" + "house")
gh.delete("erp", "/invoices")
