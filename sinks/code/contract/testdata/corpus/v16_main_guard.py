# The usual main() behind the __main__ guard.
import gatehouse
import sys


def main(argv):
    invoice = argv[1]
    gatehouse.get("erp", f"/invoices/{invoice}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
