# Unpickling data runs code chosen by the data.
import pickle
import sys

obj = pickle.loads(sys.stdin.buffer.read())
