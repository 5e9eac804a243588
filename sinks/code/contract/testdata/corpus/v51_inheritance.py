# A base class and a subclass overriding its base path.
import gatehouse
import sys


class Base:
    root = "/api"

    def get(self, rel):
        return gatehouse.get("erp", self.root + rel)


class V2(Base):
    root = "/api/v2"

    def invoice(self, i):
        return self.get(f"/invoices/{i}")


V2().invoice(sys.argv[1])
