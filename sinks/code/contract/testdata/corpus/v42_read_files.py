# Reading files given beside the program is harmless.
# files: invoices.csv, settings.json
import csv
import json

import gatehouse

with open("settings.json") as f:
    settings = json.load(f)
with open("invoices.csv", newline="") as f:
    for row in csv.DictReader(f):
        gatehouse.post("erp", f"/invoices/{row['id']}/remind")
