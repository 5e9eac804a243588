# Gatehouse's contract reader, the part that runs in the sandbox: CPython's own
# parser reads the program (from stdin, as bytes, so a coding declaration or a
# BOM is honoured exactly as when the program runs) and the tree is written to
# stdout as one JSON object. Nothing of the program is executed.
#
# Output: {"v": 1, "python": "3.11.7", "stdlib": [...], "module": NODE}
#     or  {"v": 1, "python": ..., "error": {"kind": "syntax"|"too-deep"|"too-large", "msg", "line", "col"}}
# NODE:  {"_": "Call", "@": [line, col], "func": NODE, "args": [NODE...], ...}
#        every field of the node in ast order, except expression contexts.
# Constants: {"_": "Constant", "value": {"t": "str"|"int"|"float"|"complex"|"bytes"|"bool"|"none"|"ellipsis", "v": ...}}
#        str values that are not valid Unicode (lone surrogates) are {"t": "str", "bad": true}.
import ast
import json
import sys

sys.setrecursionlimit(100000)

VERSION = 1


def const(v):
    if v is None:
        return {"t": "none"}
    if v is Ellipsis:
        return {"t": "ellipsis"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, complex):
        return {"t": "complex", "v": repr(v)}
    if isinstance(v, bytes):
        return {"t": "bytes", "v": v.hex()}
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return {"t": "str", "bad": True}
        return {"t": "str", "v": v}
    return {"t": "unknown"}


def enc(n):
    if isinstance(n, ast.AST):
        d = {"_": type(n).__name__}
        if hasattr(n, "lineno"):
            d["@"] = [n.lineno, n.col_offset]
        for f in n._fields:
            if f == "ctx" or f == "type_comment":
                continue
            v = getattr(n, f, None)
            if isinstance(n, ast.Constant) and f == "value":
                d[f] = const(v)
            else:
                d[f] = enc(v)
        return d
    if isinstance(n, list):
        return [enc(x) for x in n]
    if n is None or isinstance(n, (bool, int, str)):
        if isinstance(n, str):
            try:
                n.encode("utf-8")
            except UnicodeEncodeError:
                return "\ufffd"
        return n
    return const(n)


def dump(src):
    """Returns the JSON text of the tree of src (bytes)."""
    out = {"v": VERSION, "python": "%d.%d.%d" % sys.version_info[:3],
           "stdlib": sorted(getattr(sys, "stdlib_module_names", ()))}
    try:
        tree = ast.parse(src, filename="main.py")
        out["module"] = enc(tree)
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False)
    except SyntaxError as e:
        out.pop("module", None)
        out["error"] = {"kind": "syntax", "msg": str(e.msg), "line": e.lineno or 0, "col": e.offset or 0}
    except (RecursionError, MemoryError) as e:
        out.pop("module", None)
        out["error"] = {"kind": "too-deep", "msg": type(e).__name__, "line": 0, "col": 0}
    except ValueError as e:  # null bytes in the source
        out.pop("module", None)
        out["error"] = {"kind": "syntax", "msg": str(e), "line": 0, "col": 0}
    return json.dumps(out, separators=(",", ":"))


if __name__ == "__main__":
    sys.stdout.buffer.write(dump(sys.stdin.buffer.read()).encode("utf-8"))
