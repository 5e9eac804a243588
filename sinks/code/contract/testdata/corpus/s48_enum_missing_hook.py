# Soundness probe: Enum calls a class's _missing_ itself when a value names no member.
import enum, gatehouse
gatehouse.get("erp", "/start")
class Status(enum.Enum):
    OPEN = "open"
    @classmethod
    def _missing_(cls, value):
        gatehouse.delete("erp", "/missing")
        return None
try:
    Status("closed")
except ValueError:
    pass
