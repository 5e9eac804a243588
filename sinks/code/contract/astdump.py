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
import _ast
import sys

from _json import encode_basestring as _q

sys.setrecursionlimit(100000)

VERSION = 1
ONLY_AST = 0x400  # ast.PyCF_ONLY_AST: the ast module itself is not imported, which halves the start


def const(v):
    if v is None:
        return '{"t":"none"}'
    if v is Ellipsis:
        return '{"t":"ellipsis"}'
    if isinstance(v, bool):
        return '{"t":"bool","v":%s}' % ("true" if v else "false")
    if isinstance(v, int):
        return '{"t":"int","v":"%d"}' % v
    if isinstance(v, float):
        return '{"t":"float","v":%s}' % _q(repr(v))
    if isinstance(v, complex):
        return '{"t":"complex","v":%s}' % _q(repr(v))
    if isinstance(v, bytes):
        return '{"t":"bytes","v":"%s"}' % v.hex()
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return '{"t":"str","bad":true}'
        return '{"t":"str","v":%s}' % _q(v)
    return '{"t":"unknown"}'


def text(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return _q("\ufffd")
    return _q(s)


def enc(n, out):
    if isinstance(n, _ast.AST):
        out.append('{"_":"%s"' % type(n).__name__)
        if hasattr(n, "lineno"):
            out.append(',"@":[%d,%d]' % (n.lineno, n.col_offset))
        const_node = isinstance(n, _ast.Constant)
        for f in n._fields:
            if f == "ctx" or f == "type_comment":
                continue
            out.append(',"%s":' % f)
            v = getattr(n, f, None)
            if const_node and f == "value":
                out.append(const(v))
            else:
                enc(v, out)
        out.append("}")
    elif isinstance(n, list):
        out.append("[")
        for i, x in enumerate(n):
            if i:
                out.append(",")
            enc(x, out)
        out.append("]")
    elif n is None:
        out.append("null")
    elif isinstance(n, bool):
        out.append("true" if n else "false")
    elif isinstance(n, int):
        out.append("%d" % n)
    elif isinstance(n, str):
        out.append(text(n))
    else:
        out.append(const(n))


def dump(src):
    """Returns the JSON text of the tree of src (bytes)."""
    head = '{"v":%d,"python":"%d.%d.%d","stdlib":[%s]' % (
        (VERSION,) + tuple(sys.version_info[:3]) + (",".join(_q(m) for m in sorted(getattr(sys, "stdlib_module_names", ()))),))
    try:
        tree = compile(src, "main.py", "exec", ONLY_AST, dont_inherit=True)
        out = [head, ',"module":']
        enc(tree, out)
        out.append("}")
        return "".join(out)
    except SyntaxError as e:
        err = ("syntax", str(e.msg), e.lineno or 0, e.offset or 0)
    except (RecursionError, MemoryError) as e:
        err = ("too-deep", type(e).__name__, 0, 0)
    except ValueError as e:  # null bytes in the source
        err = ("syntax", str(e), 0, 0)
    return head + ',"error":{"kind":"%s","msg":%s,"line":%d,"col":%d}}' % (err[0], text(err[1]), err[2], err[3])


if __name__ == "__main__":
    sys.stdout.buffer.write(dump(sys.stdin.buffer.read()).encode("utf-8"))
