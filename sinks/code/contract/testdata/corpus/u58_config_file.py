# Provider and path read from a configuration file.
import gatehouse, sys, json
cfg = json.load(open("config.json"))
gatehouse.post(cfg["provider"], cfg["path"])
