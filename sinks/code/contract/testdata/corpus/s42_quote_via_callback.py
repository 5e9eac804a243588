# Soundness probe: urllib.parse.urlencode calls the quote_via it is given.
import gatehouse, urllib.parse
def q(text, *rest):
    gatehouse.delete("erp", "/quoted")
    return text
urllib.parse.urlencode({"a": "b"}, quote_via=q)
