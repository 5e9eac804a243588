# A helper the program never calls is not in the contract; it is listed as
# unreached.
import gatehouse


def purge():
    gatehouse.delete("erp", "/invoices")


def main():
    gatehouse.get("erp", "/invoices")


main()
