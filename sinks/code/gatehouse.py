"""Gatehouse's client for programs run in its sandbox.

A program calls a provider through Gatehouse, which decides the call,
records it and carries it out with the credential of the person the work
is for; the program never sees the credential and has no network of its
own:

    import gatehouse

    inv = gatehouse.get("erp", f"/invoices/{invoice_id}").body
    r = gatehouse.post("erp", "/payments", body={"invoice": invoice_id,
                                                 "amount": inv["amount_due"]},
                       atom="erp.pay")
    print(r.status, r.body)

call(provider, method, path, body=None, ...) sends one request; get,
post, put, patch, delete, head and options(provider, path, body=None, ...)
are the same with the method fixed. body is JSON; keyword arguments:
query (a dict of str to str or list of str), headers, data (bytes, with
content_type), content_type, atom (the integration the call is made for)
and operation_id (the idempotency key).
A query written into the path ("/invoices?status=open") is sent as the
query.

A call returns a Response (status, headers, body, decision, effect). A
provider's 4xx or 5xx is a Response too. A call Gatehouse refuses, or holds
for a person's approval, raises Refused (refusal, rule, reasons, decision);
one it cannot carry raises Error (code, message).

Before the program runs, Gatehouse reads from its code every call it can
make (provider, method and path template) and holds the program to them:
keep provider, method and the fixed parts of each path in the code, as
literals, constants or values built from them, so that the contract can
be verified. `gatehouse contract read main.py` shows what it finds.

This module talks to Gatehouse over the two descriptors the sandbox gives
the program (one JSON request per line out, one JSON reply per line in).
"""

import base64 as _base64
import json as _json
import os as _os
from urllib.parse import parse_qs as _parse_qs

__all__ = ["call", "get", "post", "put", "patch", "delete", "head", "options",
           "Response", "Error", "Refused"]


class Error(Exception):
    """Gatehouse could not carry the call: code is a stable name
    (BAD_REQUEST, EFFECT_FAILED, UNAVAILABLE, NO_GATEWAY, ...)."""

    def __init__(self, code, message, reply=None):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.reply = reply


class Refused(Error):
    """Gatehouse decided against the call (outcome "refused"), or holds it
    for a person's approval (outcome "held"); nothing was sent."""

    def __init__(self, decision, reply=None):
        self.decision = decision
        self.outcome = decision.get("outcome")
        self.refusal = decision.get("refusal")
        self.rule = decision.get("rule")
        self.reasons = decision.get("reasons") or []
        detail = "; ".join(r.get("detail", "") for r in self.reasons if r.get("enforced"))
        super().__init__(self.refusal or self.outcome, detail or "refused", reply)


class Response:
    """A provider's answer: status, headers, body (the JSON value, or bytes
    for any other content), the decision Gatehouse made and the effect id."""

    __slots__ = ("status", "headers", "body", "decision", "effect", "reply")

    def __init__(self, reply):
        result = reply.get("result") or {}
        self.reply = reply
        self.status = result.get("status")
        self.headers = result.get("headers") or {}
        if "body_base64" in result:
            self.body = _base64.b64decode(result["body_base64"])
        else:
            self.body = result.get("body")
        self.decision = reply.get("decision") or {}
        self.effect = reply.get("effect")

    @property
    def ok(self):
        return self.status is not None and 200 <= self.status < 400

    def json(self):
        return self.body

    def __repr__(self):
        return "<gatehouse.Response %s>" % self.status


# The descriptors are read when the module is imported, before the program
# runs: a program changing its environment changes nothing here.
_OUT, _IN = _os.environ.get("GATEHOUSE_GATEWAY_OUT"), _os.environ.get("GATEHOUSE_GATEWAY_IN")
_channel = None


def _open():
    global _channel
    if _channel is None:
        out, inp = _OUT, _IN
        if not out or not inp:
            raise Error("NO_GATEWAY", "this program runs without Gatehouse's gateway, so it cannot call providers")
        _channel = (_os.fdopen(int(out), "w", buffering=1, encoding="utf-8"),
                    _os.fdopen(int(inp), "r", encoding="utf-8"))
    return _channel


def _roundtrip(request):
    w, r = _open()
    w.write(_json.dumps(request, separators=(",", ":")) + "\n")
    w.flush()
    line = r.readline()
    if not line:
        raise Error("NO_GATEWAY", "the gateway closed")
    return _json.loads(line)


def _text(name, value):
    if type(value) is not str:
        raise TypeError("gatehouse: %s must be a str, not %s" % (name, type(value).__name__))
    return value


def call(provider, method, path, body=None, *, query=None, headers=None, data=None,
         content_type=None, atom=None, operation_id=None):
    """Sends one request to provider through Gatehouse and returns its Response."""
    request = {"provider": _text("provider", provider), "method": _text("method", method)}
    path = _text("path", path)
    if "?" in path:
        path, _, raw = path.partition("?")
        q = {k: list(v) for k, v in _parse_qs(raw, keep_blank_values=True).items()}
        for k, v in (query or {}).items():
            q.setdefault(k, []).extend(v if isinstance(v, (list, tuple)) else [v])
        query = q
    request["path"] = path
    if query:
        request["query"] = {str(k): [str(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
                            for k, v in query.items()}
    if headers:
        request["headers"] = {str(k): str(v) for k, v in headers.items()}
    if body is not None and data is not None:
        raise TypeError("gatehouse: give body or data, not both")
    if body is not None:
        request["body"] = body
    if data is not None:
        request["body_base64"] = _base64.b64encode(bytes(data)).decode("ascii")
    if content_type is not None:
        request["content_type"] = _text("content_type", content_type)
    if atom is not None:
        request["atom"] = _text("atom", atom)
    if operation_id is not None:
        request["operation_id"] = _text("operation_id", operation_id)
    reply = _roundtrip(request)
    err = reply.get("error")
    decision = reply.get("decision")
    if decision and decision.get("outcome") != "allowed":
        raise Refused(decision, reply)
    if err:
        raise Error(err.get("code", "INTERNAL"), err.get("message", ""), reply)
    return Response(reply)


def get(provider, path, body=None, **kw):
    return call(provider, "GET", path, body, **kw)


def head(provider, path, body=None, **kw):
    return call(provider, "HEAD", path, body, **kw)


def options(provider, path, body=None, **kw):
    return call(provider, "OPTIONS", path, body, **kw)


def post(provider, path, body=None, **kw):
    return call(provider, "POST", path, body, **kw)


def put(provider, path, body=None, **kw):
    return call(provider, "PUT", path, body, **kw)


def patch(provider, path, body=None, **kw):
    return call(provider, "PATCH", path, body, **kw)


def delete(provider, path, body=None, **kw):
    return call(provider, "DELETE", path, body, **kw)
