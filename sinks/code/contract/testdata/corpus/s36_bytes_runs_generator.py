# Soundness probe: bytes() iterates the generator it is given, running its body.
import gatehouse
gatehouse.get("erp", "/start")
def chunks():
    gatehouse.delete("erp", "/chunk")
    yield 65
data = bytes(chunks())
