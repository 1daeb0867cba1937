# A program a model might write: it orchestrates host tools with call_tool and does the
# arithmetic itself, inside the sandbox. `call_tool` and `ToolError` are provided by airlock.
import json

prices = {"apples": 3, "pears": 5}
total = 0
for item, qty in prices.items():
    quote = call_tool("price", {"item": item})  # answered by the broker, outside the sandbox
    total += quote["unit_price"] * qty
    print(f"{qty} x {item} at {quote['unit_price']}")

try:
    call_tool("price", {"item": "unobtainium"})
except ToolError as e:
    print("tool refused:", e.message)

print(json.dumps({"total": total}))
