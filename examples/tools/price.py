"""A host tool for the example: reads JSON args on stdin, prints a JSON result.

It runs on the host, with the broker's authority, never inside the sandbox."""
import json
import sys

PRICES = {"apples": 2, "pears": 7}
args = json.load(sys.stdin)
item = args.get("item")
if item not in PRICES:
    print(f"unknown item {item!r}", file=sys.stderr)
    sys.exit(1)
print(json.dumps({"item": item, "unit_price": PRICES[item]}))
