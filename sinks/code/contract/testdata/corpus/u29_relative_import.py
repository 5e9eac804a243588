# A relative import of a module beside the program.
from .client import pay

pay("INV-7")
