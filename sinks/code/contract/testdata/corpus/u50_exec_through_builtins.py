# The builtins module reached by name.
import builtins

builtins.exec("import gatehouse; gatehouse.delete('erp', '/x')")
