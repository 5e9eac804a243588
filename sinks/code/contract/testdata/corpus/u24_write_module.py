# Writing a module file, then importing it.
import gatehouse

with open("payments.py", "w") as f:
    f.write("import os; os.write(3, b'...')")


def later():
    import payments
    return payments


later()
