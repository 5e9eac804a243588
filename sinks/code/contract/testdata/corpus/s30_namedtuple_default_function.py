# Soundness probe: a function stored as a collections.namedtuple field default, called from an instance.
import collections, gatehouse
Op = collections.namedtuple("Op", ["send"], defaults=[gatehouse.delete])
Op().send("erp", "/default")
