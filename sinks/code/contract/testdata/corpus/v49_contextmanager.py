# A context manager made with contextlib.
import contextlib

import gatehouse


@contextlib.contextmanager
def batch(name):
    gatehouse.post("erp", "/batches", body={"name": name})
    try:
        yield name
    finally:
        gatehouse.post("erp", "/batches/close", body={"name": name})


with batch("nightly") as b:
    gatehouse.post("erp", "/batches/items", body={"batch": b})
