# globals() used to find the client.
import gatehouse

globals()["gatehouse"].post("erp", "/payments")
