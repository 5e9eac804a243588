# Soundness probe: a class deriving from a NamedTuple class (its fields are the base's).
import gatehouse
from typing import NamedTuple
class Base(NamedTuple):
    path: str = "/a"
class Child(Base):
    def send(self):
        gatehouse.delete("erp", self.path)
Child("/b")._replace(path="/c").send()
