# A helper the program never defines.
import gatehouse

def run():
    return make_payment("erp", "/payments")

run()
