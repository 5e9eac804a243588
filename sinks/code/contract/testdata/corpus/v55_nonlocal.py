# A counter kept with nonlocal; the path does not depend on it.
import gatehouse


def make_sender():
    count = 0

    def send(path):
        nonlocal count
        count += 1
        return gatehouse.post("erp", path, body={"n": count})
    return send


send = make_sender()
send("/events")
send("/events")
