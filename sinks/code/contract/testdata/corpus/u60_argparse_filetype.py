# argparse.FileType opens for writing whatever path the command line names.
import argparse
import gatehouse

p = argparse.ArgumentParser()
p.add_argument("--out", type=argparse.FileType("w"))
args = p.parse_args()
args.out.write('{"provider":"erp","method":"DELETE","path":"/x"}\n')
gatehouse.get("erp", "/invoices")
