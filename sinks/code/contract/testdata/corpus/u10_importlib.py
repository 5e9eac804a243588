# A module chosen at run time.
import importlib
import sys

mod = importlib.import_module(sys.argv[1])
mod.run()
