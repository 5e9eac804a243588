# The entry function sends to a URL its input names.
# entry: run
import gatehouse


def run(params):
    return gatehouse.post("erp", params["callback_url"], body={"ok": True})
