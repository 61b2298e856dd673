"""The official MCP Python client against tollgate, for tests/it/mcp.

    python client.py COMMAND ARGS...

Each command prints JSON lines on stdout for the Rust test to read.
"""

import asyncio
import json
import subprocess
import sys

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def say(value):
    print(json.dumps(value), flush=True)


def http_client(url, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=90.0))
    return http, Client(streamable_http_client(url, http_client=http))


def leaves(error):
    """The errors an exception group holds, however nested."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def view(result):
    if result.is_error:
        raise SystemExit(f"tool error: {result.content[0].text}")
    # The text block carries the same JSON as the structured content.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def listing(client):
    tools = await client.list_tools()
    say({
        "protocol": client.session.protocol_version,
        "tools": [
            {"name": t.name, "inputSchema": t.input_schema, "outputSchema": t.output_schema}
            for t in tools.tools
        ],
    })


async def ask_and_wait(client, message):
    request = view(await client.call_tool("request_approval", {"message": message, "payload": {"cents": 500}}))
    say({"asked": request})
    while request["state"] == "pending":
        request = view(await client.call_tool("wait_for_approval", {"key": request["key"], "timeout_seconds": 30}))
    say({"final": request})
    return request


async def main(command, args):
    if command == "list":
        url, token = args
        http, client = http_client(url, token)
        async with http, client:
            await listing(client)
    elif command == "ask-and-wait":
        url, token = args
        http, client = http_client(url, token)
        async with http, client:
            await ask_and_wait(client, "Refund $5?")
    elif command == "bad-arguments":
        url, token = args
        http, client = http_client(url, token)
        async with http, client:
            for name, arguments in [
                ("request_approval", {"message": "Refund $5?", "payload": {"cents": 500}, "ttl": 30}),
                ("request_approval", {"payload": {"cents": 500}}),
                ("approve", {"key": "x"}),
            ]:
                try:
                    await client.call_tool(name, arguments)
                    say({"tool": name, "error": None})
                except MCPError as e:
                    say({"tool": name, "code": e.code, "message": e.message})
            # A refusal of the service is a tool result, not a protocol error.
            result = await client.call_tool("get_approval", {"key": "no-such-key"})
            say({"tool": "get_approval", "is_error": result.is_error, "text": result.content[0].text})
    elif command == "overreach":
        # A request that would approve itself by waiting, and one that
        # would let a group outside the approvers decide: the service's
        # refusals, as tool results.
        url, token = args
        http, client = http_client(url, token)
        async with http, client:
            for policy in [{"on_timeout": "approve"}, {"allow_self_approval": True}]:
                result = await client.call_tool("request_approval", {
                    "message": "Refund $5?", "payload": {"cents": 500}, "ttl": "2s", "policy": policy})
                say({"policy": policy, "is_error": result.is_error, "text": result.content[0].text})
    elif command == "no-token":
        (url,) = args
        http, client = http_client(url, None)
        try:
            async with http, client:
                await client.list_tools()
            say({"refused": None})
        except BaseException as e:  # the client's own error, inside task groups
            say({"refused": [f"{type(leaf).__name__}: {leaf}" for leaf in leaves(e)]})
    elif command == "stdio":
        tollgate, spec, state = args
        server = StdioServerParameters(
            command=tollgate, args=["mcp", spec, "--state", state, "--as", "desk-agent"]
        )
        async with Client(server) as client:
            await listing(client)
            request = view(await client.call_tool(
                "request_approval", {"message": "Ship order 7?", "payload": {"order": 7}}))
            say({"asked": request})
            # Another process decides: the CLI, on the same store.
            decided = subprocess.run(
                [tollgate, "approvals", "approve", request["key"], "--spec", spec,
                 "--state", state, "--by", "alice", "--reason", "looks right"],
                capture_output=True, text=True)
            say({"cli": decided.returncode, "stderr": decided.stderr})
            while request["state"] == "pending":
                request = view(await client.call_tool(
                    "wait_for_approval", {"key": request["key"], "timeout_seconds": 30}))
            say({"final": request})
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
