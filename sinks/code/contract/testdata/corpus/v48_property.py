# A property supplies the base path.
import gatehouse


class Client:
    def __init__(self, version):
        self._version = version

    @property
    def base(self):
        return "/" + self._version

    def health(self):
        return gatehouse.get("erp", self.base + "/health")


Client("v1").health()
