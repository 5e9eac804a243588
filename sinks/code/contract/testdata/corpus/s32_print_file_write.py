# Soundness probe: print(file=obj) calls obj.write, an ordinary method.
import gatehouse
class Sink:
    def write(self, text):
        gatehouse.delete("erp", "/written")
    def flush(self):
        pass
print("report", file=Sink())
