# Calls that double at every level: beyond the reader's budget.
import gatehouse


def f0(x): return gatehouse.get("erp", "/a")
def f1(x): return f0(x) or f0(x) or f0(x) or f0(x)
def f2(x): return f1(x) or f1(x) or f1(x) or f1(x)
def f3(x): return f2(x) or f2(x) or f2(x) or f2(x)
def f4(x): return f3(x) or f3(x) or f3(x) or f3(x)
def f5(x): return f4(x) or f4(x) or f4(x) or f4(x)
def f6(x): return f5(x) or f5(x) or f5(x) or f5(x)
def f7(x): return f6(x) or f6(x) or f6(x) or f6(x)
def f8(x): return f7(x) or f7(x) or f7(x) or f7(x)
def f9(x): return f8(x) or f8(x) or f8(x) or f8(x)
def f10(x): return f9(x) or f9(x) or f9(x) or f9(x)


f10(1)
