# Soundness probe: an Enum member's value, holding the client, read back through .value.
import enum, gatehouse
gatehouse.get("erp", "/start")
class Action(enum.Enum):
    DROP = (gatehouse.delete,)
Action.DROP.value[0]("erp", "/member-value")
