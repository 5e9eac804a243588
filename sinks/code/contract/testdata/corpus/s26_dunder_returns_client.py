# Soundness probe: A special method returning the client.
import gatehouse
class Box:
    def __abs__(self):
        return gatehouse.delete
abs(Box())("erp", "/abs")
