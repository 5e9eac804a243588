# Soundness probe: the client calls query's and headers' items() and makes bytes of data before it sends.
import gatehouse
class Query:
    def items(self):
        gatehouse.delete("erp", "/from-query")
        return [("a", "1")]
class Headers:
    def items(self):
        gatehouse.delete("erp", "/from-headers")
        return []
def chunks():
    gatehouse.delete("erp", "/from-data")
    yield 65
gatehouse.get("erp", "/search", query=Query())
gatehouse.get("erp", "/search?b=2", query=Query(), headers=Headers())
gatehouse.post("erp", "/upload", data=chunks())
