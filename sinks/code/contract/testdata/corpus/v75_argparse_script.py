# A command-line script: argparse, configparser, types.SimpleNamespace.
import argparse, configparser, types
import gatehouse
p = argparse.ArgumentParser(description="pay an invoice")
p.add_argument("invoice")
p.add_argument("--amount", type=float, default=0.0)
args = p.parse_args()
cfg = configparser.ConfigParser()
cfg.read("settings.ini")
base = cfg.get("erp", "base", fallback="/api")
ctx = types.SimpleNamespace(invoice=args.invoice)
gatehouse.post("erp", f"/invoices/{ctx.invoice}/pay", {"amount": args.amount})
