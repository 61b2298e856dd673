"""Ask a person before acting, over plain HTTP: a client of tollgate's /gates.

An agent about to do something it should not do alone (pay, delete,
deploy) asks tollgate for an approval, waits for the decision, and acts
only on what was approved -- the payload as the approver left it, which
may be an edit of what was asked. Nothing here is tollgate-specific
beyond three HTTP calls:

    POST   /gates                     ask; answers 201 with the request's key
    GET    /gates/{key}?wait=30s      long-poll: answers once decided, or after 30 s
    DELETE /gates/{key}               withdraw the request (not used here)

Run it against a server (`tollgate serve agent.yaml`):

    TOLLGATE_URL=http://127.0.0.1:8080 TOLLGATE_TOKEN=... \
        python examples/clients/http_client.py --order 1042 --amount 30

TOLLGATE_TOKEN can be a requester token (`TOLLGATE_API_TOKENS=
refund-bot/requester:...` on the server): it may ask and wait, never
decide. Someone decides in the inbox, Slack, a link, or with
`tollgate approvals approve KEY`.

The wait survives anything in between: the request lives in tollgate's
store, not in this process or in the server. On a connection error (the
server restarting, a proxy cutting a long poll) this client waits a
little and polls again; a restarted agent that asks again with the same
idempotency key gets the same request back, decided or not.

Exit status: 0 when approved (and acted on), 1 when not approved
(rejected, expired or cancelled), 2 when the request itself failed.
Requires `httpx` (pip install httpx).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone

import httpx

# One long poll. The server answers by then at the latest (it caps a
# wait at 60 s), so the client's read timeout is a little longer.
WAIT = "30s"
READ_TIMEOUT = 45.0
# Between reconnection attempts: 0.5 s, doubling up to 5 s.
FIRST_RETRY, MAX_RETRY = 0.5, 5.0


def log(text: str) -> None:
    """Progress goes to stderr; stdout is for the outcome."""
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--order", default="1042", help="the order to refund")
    parser.add_argument("--amount", type=int, default=30, help="EUR")
    parser.add_argument("--ttl", default="4h", help="how long it may be decided")
    args = parser.parse_args()

    base_url = os.environ.get("TOLLGATE_URL", "http://127.0.0.1:8080")
    token = os.environ.get("TOLLGATE_TOKEN")
    if not token:
        log("set TOLLGATE_TOKEN to a token of the server's TOLLGATE_API_TOKENS")
        return 2

    request = {
        "message": f"Refund {args.amount} EUR for order {args.order}?",
        "payload": {"order": args.order, "amount": args.amount},
        "step": "refund",
        "ttl": args.ttl,
        # The same action always gets the same key: asking again (after a
        # crash, a retry, a restart of this agent) returns the request
        # already made instead of making a second one.
        "idempotency_key": f"refund-{args.order}",
    }
    timeout = httpx.Timeout(10.0, read=READ_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=timeout) as client:
        gate = call(client, "POST", "/gates", json=request)
        if gate is None:
            return 2
        print(f"requested approval {gate['key']}: {gate['message']}", flush=True)
        gate = wait_for_decision(client, gate)
        if gate is None:
            return 2
    return act_on(gate)


def wait_for_decision(client: httpx.Client, gate: dict) -> dict | None:
    """Long-poll until the request is no longer pending."""
    key = gate["key"]
    while gate["state"] == "pending":
        log(f"waiting for a decision on {key} (until {gate['expires_at']})")
        latest = call(
            client, "GET", f"/gates/{key}", params={"wait": WAIT}, until=gate["expires_at"]
        )
        if latest is None:
            return None
        gate = latest
    return gate


def call(
    client: httpx.Client, method: str, path: str, until: str | None = None, **kwargs
) -> dict | None:
    """One API call, repeated on connection errors and 5xx answers until it
    gets an answer (or, given `until`, that time passes: the request has
    expired by then anyway). A 4xx answer is the caller's mistake: it is
    printed and None returned."""
    deadline = parse_time(until) if until else None
    delay = FIRST_RETRY
    while True:
        try:
            response = client.request(method, path, **kwargs)
        except httpx.TransportError as error:
            problem = f"connection failed ({type(error).__name__}: {error})"
        else:
            if response.status_code < 500:
                body = response.json()
                if response.is_success:
                    return body
                error = body.get("error", {})
                log(f"{method} {path}: {response.status_code} {error.get('code')}: {error.get('message')}")
                return None
            problem = f"server error {response.status_code}"
        if deadline and datetime.now(timezone.utc) > deadline:
            log(f"{problem}; giving up: the request has expired by now")
            return None
        log(f"{problem}; reconnecting in {delay:.1f} s")
        time.sleep(delay)
        delay = min(delay * 2, MAX_RETRY)


def act_on(gate: dict) -> int:
    """The decision says what to do: with `approved`, act on
    `decision.payload` (what the approver approved, edited or not), never
    on the payload as asked."""
    decision = gate.get("decision") or {}
    if gate["approved"]:
        payload = json.dumps(decision["payload"], sort_keys=True)
        print(f"{decision['outcome']} by {decision['by']}: acting on {payload}", flush=True)
        # ... refund here, with decision["payload"] ...
        return 0
    if gate["state"] == "decided":
        why = f"rejected by {decision['by']}: {decision.get('reason') or 'no reason given'}"
    elif gate["state"] == "cancelled":
        why = f"cancelled by {decision.get('by')}"
    else:
        why = f"{gate['state']}: no decision before {gate['expires_at']}"
    print(f"not acting: {why}", flush=True)
    return 1


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as the server writes it (`...Z`)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


if __name__ == "__main__":
    sys.exit(main())
