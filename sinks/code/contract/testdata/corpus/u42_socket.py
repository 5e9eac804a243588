# A socket of its own.
import socket

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.connect(("erp.example.com", 443))
