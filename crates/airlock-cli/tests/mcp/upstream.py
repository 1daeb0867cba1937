#!/usr/bin/env python3
"""A small upstream MCP server for airlock's tests: newline-delimited JSON-RPC on stdio.

Usage: upstream.py FLAVOR, where FLAVOR picks the tool set:
  weather  forecast(city, days?) -> structured {"city", "temp_c", "days"}; fail(reason) -> isError;
           big(n) -> n bytes of text; whoami() -> see below
  calc     add(a, b) -> text "<a+b>"; mul(a, b=1) -> structured {"result": a*b}, as an MCP
           SDK wraps a scalar return (outputSchema with one `result` property); hang() -> never
           answers
`whoami()` (weather) says whether this process holds the SECRET_TOKEN environment variable,
so a test can show that a credential given to airlock reaches the upstream, not the sandbox.
"""
import json
import os
import sys
import time

FLAVOR = sys.argv[1] if len(sys.argv) > 1 else "weather"

TOOLS = {
    "weather": [
        {
            "name": "forecast",
            "description": "Forecast for a city.\nReturns the temperature in Celsius.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
        {
            "name": "fail",
            "description": "Always reports a tool error.",
            "inputSchema": {"type": "object", "properties": {"reason": {"type": "string"}}},
        },
        {
            "name": "big",
            "description": "Answers n bytes of text.",
            "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                            "required": ["n"]},
        },
        {
            "name": "whoami",
            "description": "Says whether this server holds SECRET_TOKEN.",
            "inputSchema": {"type": "object", "properties": {}},
        },
    ],
    "calc": [
        {
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
        {
            "name": "mul",
            "description": "Multiply two integers.",
            "inputSchema": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 1}},
                "required": ["a"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {"result": {"type": "integer"}},
                "required": ["result"],
                "x-fastmcp-wrap-result": True,
            },
        },
        {
            "name": "hang",
            "description": "Never answers.",
            "inputSchema": {"type": "object", "properties": {}},
        },
    ],
}[FLAVOR]

TEMPS = {"paris": 18, "oslo": 4}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def text(s, is_error=False):
    r = {"content": [{"type": "text", "text": s}]}
    if is_error:
        r["isError"] = True
    return r


def call(name, args):
    if name == "forecast":
        city = args["city"]
        out = {"city": city, "temp_c": TEMPS.get(city.lower(), 20), "days": args.get("days", 1)}
        r = text(json.dumps(out))
        r["structuredContent"] = out
        return r
    if name == "fail":
        return text("upstream refused: " + args.get("reason", "no reason"), is_error=True)
    if name == "big":
        return text("a" * args["n"])
    if name == "whoami":
        return text(json.dumps({"has_token": bool(os.environ.get("SECRET_TOKEN"))}))
    if name == "add":
        return text(str(args["a"] + args["b"]))
    if name == "mul":
        product = args["a"] * args.get("b", 1)
        r = text(str(product))
        r["structuredContent"] = {"result": product}
        return r
    if name == "hang":
        while True:
            time.sleep(3600)
    return None


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg or "method" not in msg:
        continue  # notifications and responses
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "test-" + FLAVOR, "version": "0.1"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        result = call(params.get("name"), params.get("arguments") or {})
        if result is None:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32602, "message": "unknown tool"}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32601, "message": "method not found"}})
