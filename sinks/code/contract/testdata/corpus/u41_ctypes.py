# ctypes reaches any system call.
import ctypes

libc = ctypes.CDLL(None)
libc.write(3, b"{}\n", 3)
