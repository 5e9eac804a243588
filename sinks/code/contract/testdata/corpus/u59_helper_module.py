# A helper module beside the program builds the path.
import gatehouse
import helpers
gatehouse.post("erp", helpers.payment_path())
