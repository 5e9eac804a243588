# A retry decorator wrapping a helper; the wrapper passes *args and **kwargs on.
import functools
import gatehouse
import sys


def retry(times):
    def wrap(f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            for _ in range(times):
                try:
                    return f(*args, **kwargs)
                except gatehouse.Error:
                    continue
            raise RuntimeError("gave up")
        return inner
    return wrap


@retry(3)
def remind(invoice, channel="email"):
    return gatehouse.post("erp", "/invoices/%s/remind" % invoice, body={"channel": channel})


remind(sys.argv[1], channel="sms")
