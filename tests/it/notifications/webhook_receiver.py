"""A webhook receiver for the tests: checks every request with the
official Standard Webhooks verifier (the `standardwebhooks` package from
PyPI) and answers as told.

    webhook_receiver.py --secret S --log FILE [--mode verify|gone|hang|redirect|huge]
                        [--fail-first N] [--fail-status 500] [--retry-after VALUE]

It listens on a free loopback port and prints that port on its first line
of stdout. Every request is appended to FILE as one JSON line: the
`webhook-id`, `webhook-timestamp`, the body, whether the library verified
it, the status answered, and the path. Answers:

- a request the library refuses: 401;
- `--mode verify` (default): 204, after the first N verified requests of
  `--fail-first`, which get `--fail-status` (with `Retry-After: VALUE`
  when given) and a two-line body;
- `--mode gone`: 410 with a short body;
- `--mode redirect`: 307 to another path on this receiver, carrying a
  token in the query (the sender must not follow it);
- `--mode hang`: never answers (until the test ends the process);
- `--mode huge`: 500 with a body that claims a gigabyte and streams until
  the sender hangs up.
- `--hang-first N`: the first N verified requests are recorded and never
  answered (a sender killed mid-send); later ones as `--mode` says.
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--mode", default="verify", choices=["verify", "gone", "hang", "redirect", "huge"])
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--fail-status", type=int, default=500)
    parser.add_argument("--retry-after", default=None)
    parser.add_argument("--hang-first", type=int, default=0)
    args = parser.parse_args()

    webhook = Webhook(args.secret)
    lock = threading.Lock()
    state = {"verified": 0, "hung": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            headers = {k: v for (k, v) in self.headers.items()}
            try:
                webhook.verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False

            extra = {}
            reply = b""
            with lock:
                hang = verified and state["hung"] < args.hang_first
                if hang:
                    state["hung"] += 1
            if not verified:
                status = 401
            elif hang or args.mode == "hang":
                self.record(headers, body, verified, None)
                time.sleep(3600)
                return
            elif args.mode == "huge":
                # A 500 whose body claims a gigabyte and streams until the
                # sender hangs up: a sender must read a few bytes, not it.
                self.record(headers, body, verified, 500)
                self.send_response(500)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(1 << 30))
                self.end_headers()
                chunk = b"x" * 65536
                try:
                    for _ in range((1 << 30) // len(chunk)):
                        self.wfile.write(chunk)
                except OSError:
                    pass
                return
            elif args.mode == "gone":
                status, reply = 410, b"endpoint removed\nby its owner"
            elif args.mode == "redirect":
                status = 307
                extra["Location"] = "/elsewhere?token=redirect-token-value"
                reply = b"moved to /elsewhere?token=redirect-token-value"
            else:
                with lock:
                    state["verified"] += 1
                    failing = state["verified"] <= args.fail_first
                if failing:
                    status = args.fail_status
                    reply = b"simulated outage\nsecond line\tof the body"
                    if args.retry_after is not None:
                        extra["Retry-After"] = args.retry_after
                else:
                    status = 204
            self.record(headers, body, verified, status)
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            if status != 204:
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            if status != 204:
                self.wfile.write(reply)

        def record(self, headers, body, verified, status) -> None:
            lowered = {k.lower(): v for (k, v) in headers.items()}
            line = json.dumps(
                {
                    "id": lowered.get("webhook-id"),
                    "timestamp": lowered.get("webhook-timestamp"),
                    "signature": lowered.get("webhook-signature"),
                    "content_type": lowered.get("content-type"),
                    "user_agent": lowered.get("user-agent"),
                    "body": body.decode("utf-8", "replace"),
                    "verified": verified,
                    "answered": status,
                    "path": self.path,
                }
            )
            with lock, open(args.log, "a", encoding="utf-8") as log:
                log.write(line + "\n")

        def log_message(self, format, *args) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
