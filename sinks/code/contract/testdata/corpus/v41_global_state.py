# A global changed by a function: both of its values are in the contract.
import gatehouse

VERSION = "v1"


def upgrade():
    global VERSION
    VERSION = "v2"


def health():
    return gatehouse.get("erp", f"/{VERSION}/health")


health()
upgrade()
health()
