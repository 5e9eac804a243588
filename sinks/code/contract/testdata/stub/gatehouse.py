# A stand-in for Gatehouse's client, for TestVerifiedProgramsStayInTheirContract:
# it records every call's provider, method and path (as the real client would
# send them) and answers with values that let a program go on.
import json as _json
import os as _os
from urllib.parse import parse_qs as _parse_qs

_LOG = open(_os.environ["STUB_LOG"], "a")
_calls = 0


class Error(Exception):
    def __init__(self, code="ERROR", message="", reply=None):
        super().__init__(code)
        self.code, self.message, self.reply = code, message, reply


class Refused(Error):
    outcome, refusal, rule, reasons, decision = "refused", "stub", "stub", [], {}


class Magic:
    """Any data a provider might answer."""

    def __init__(self):
        self._bools = 0

    def __getitem__(self, k):
        return Magic()

    def __getattr__(self, k):
        if k.startswith("__"):
            raise AttributeError(k)
        return Magic()

    def __call__(self, *a, **k):
        return Magic()

    def __iter__(self):
        return iter([Magic()])

    def __len__(self):
        return 1

    def __bool__(self):
        self._bools += 1
        return self._bools == 1

    def __str__(self):
        return "m1"

    __repr__ = __str__

    def __format__(self, spec):
        return "m1"

    def __float__(self):
        return 1.0

    def __int__(self):
        return 1

    __index__ = __int__

    def __add__(self, other):
        return other if isinstance(other, (list, str)) else Magic()

    __radd__ = __add__

    def __lt__(self, other):
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __eq__(self, other):
        return False

    def __hash__(self):
        return 1


class Response:
    def __init__(self):
        self.status, self.headers, self.body, self.decision, self.effect = 200, {}, Magic(), {"outcome": "allowed"}, "e"
        self.ok = True

    def json(self):
        return self.body


def call(provider, method, path, body=None, *, query=None, headers=None, data=None,
         content_type=None, atom=None, operation_id=None):
    global _calls
    _calls += 1
    if _calls > 200:
        raise Error("STUB", "enough calls")
    for name, v in (("provider", provider), ("method", method), ("path", path)):
        if type(v) is not str:
            raise TypeError(name)
    # What the real client does with the other arguments before it sends
    # (it calls their methods and special methods: their code runs).
    if "?" in path:
        q = {k: list(v) for k, v in _parse_qs(path.partition("?")[2], keep_blank_values=True).items()}
        for k, v in (query or {}).items():
            q.setdefault(k, []).extend(v if isinstance(v, (list, tuple)) else [v])
        query = q
    if query:
        {str(k): [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])] for k, v in query.items()}
    if headers:
        {str(k): str(v) for k, v in headers.items()}
    if body is not None and data is not None:
        raise TypeError("gatehouse: give body or data, not both")
    if body is not None:
        _json.dumps(body)
    if data is not None:
        bytes(data)
    _LOG.write(_json.dumps({"provider": provider, "method": method.upper(), "path": path.partition("?")[0]}) + "\n")
    _LOG.flush()
    return Response()


def get(provider, path, body=None, **kw): return call(provider, "GET", path, body, **kw)
def head(provider, path, body=None, **kw): return call(provider, "HEAD", path, body, **kw)
def options(provider, path, body=None, **kw): return call(provider, "OPTIONS", path, body, **kw)
def post(provider, path, body=None, **kw): return call(provider, "POST", path, body, **kw)
def put(provider, path, body=None, **kw): return call(provider, "PUT", path, body, **kw)
def patch(provider, path, body=None, **kw): return call(provider, "PATCH", path, body, **kw)
def delete(provider, path, body=None, **kw): return call(provider, "DELETE", path, body, **kw)
