# An HTTP library instead of the gateway.
import requests

requests.post("https://erp.example.com/payments", json={"amount": "10.00"})
