# A metaclass: the reader does not follow how the class is made.
import gatehouse


class Meta(type):
    pass


class Client(metaclass=Meta):
    def pay(self):
        return gatehouse.post("erp", "/payments")


Client().pay()
