"""An agent that asks a person before it acts, through tollgate's MCP server.

It connects to `tollgate serve` (or an exported server) at TOLLGATE_URL over
MCP's Streamable HTTP with the official MCP Python client (`pip install mcp`),
asks for approval of a refund with the `request_approval` tool, then calls
`wait_for_approval` until the request is no longer pending, and acts on what
was decided: the payload as approved, which the approver may have edited.

    TOLLGATE_URL=http://127.0.0.1:8080 TOLLGATE_TOKEN=... python mcp_agent.py

TOLLGATE_TOKEN can be a requester token (`bot/requester:TOKEN` in the
server's TOLLGATE_API_TOKENS): it may ask for approvals, never decide them.
The person decides in the inbox, in Slack, through a link or with
`tollgate approvals approve KEY`, whichever process that is.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REFUND = {"order": "A-1042", "cents": 12500, "reason": "damaged in transit"}


def answer_of(result):
    """The approval request a tool answered with, or stop on a refusal."""
    if result.is_error:
        # The API's error, as JSON: {"error": {"code": ..., "message": ...}}.
        sys.exit(f"tollgate refused: {result.content[0].text}")
    return result.structured_content


async def main() -> int:
    url = os.environ.get("TOLLGATE_URL", "http://127.0.0.1:8080").rstrip("/") + "/mcp"
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {os.environ['TOLLGATE_TOKEN']}"},
        # wait_for_approval holds a call open for up to a minute.
        timeout=httpx2.Timeout(30.0, read=90.0),
    )
    async with http, Client(streamable_http_client(url, http_client=http)) as tollgate:
        request = answer_of(
            await tollgate.call_tool(
                "request_approval",
                {
                    "message": f"Refund ${REFUND['cents'] / 100:.2f} on order {REFUND['order']}?",
                    "payload": REFUND,
                    "step": "refund",
                    "ttl": "1h",
                    # Run again after a crash, this finds the same request
                    # instead of asking twice.
                    "idempotency_key": f"refund-{REFUND['order']}",
                },
            )
        )
        print(f"waiting for approval {request['key']}", flush=True)

        # Each wait lasts at most 30 s; a decision can take hours, so ask again.
        while request["state"] == "pending":
            request = answer_of(
                await tollgate.call_tool(
                    "wait_for_approval", {"key": request["key"], "timeout_seconds": 30}
                )
            )

    decision = request["decision"]
    if not request["approved"]:
        # Rejected, expired or cancelled: do nothing.
        why = f": {decision['outcome']} by {decision['by']} ({decision['reason']})" if decision else ""
        print(f"not refunding, the request is {request['state']}{why}")
        return 1
    # Act on the decision's payload, not on what was asked: the approver
    # may have changed it.
    refund = decision["payload"]
    print(f"approved by {decision['by']}: refunding {json.dumps(refund, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
