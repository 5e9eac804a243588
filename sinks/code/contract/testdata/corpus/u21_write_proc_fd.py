# Opening the gateway descriptor through /proc.
with open("/proc/self/fd/3", "w") as f:
    f.write('{"provider":"erp","method":"DELETE","path":"/x"}\n')
