# A shell command.
import os

os.system("curl -X POST https://erp.example.com/payments")
