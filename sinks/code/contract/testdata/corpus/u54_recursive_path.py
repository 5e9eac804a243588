# A path built by recursion over run-time data.
import gatehouse
import json
import sys


def walk(node, prefix):
    gatehouse.put("storage", prefix + "/" + node["name"])
    for child in node.get("children", []):
        walk(child, prefix + "/" + node["name"])


walk(json.load(sys.stdin), "/tree")
