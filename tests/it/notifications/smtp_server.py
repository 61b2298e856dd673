"""A real SMTP server for the email notice tests (aiosmtpd).

Every message it accepts is written to --dir as one JSON file: the
envelope (sender, recipients), who logged in, whether the session was
TLS, the raw data, and the message as Python's own MIME parser reads it
(headers decoded, each non-multipart part with its content type and
decoded content), so the tests check the mail a real client would see.

    python smtp_server.py --port 2525 --dir OUT [--user U --password P]
                          [--cert C --key K [--implicit-tls]]

Prints "READY <port>" once it accepts connections and stops at the end of
its standard input (the test closes it, or kills the process).
"""

import argparse
import email
import email.policy
import json
import os
import ssl
import sys
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class Saver:
    def __init__(self, directory):
        self.directory = directory
        self.count = 0
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        # A mailbox that does not exist: the permanent refusal the tests
        # send to.
        if address.startswith("nobody@"):
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        message = email.message_from_bytes(raw, policy=email.policy.default)
        parts = []
        for part in message.walk():
            if part.is_multipart():
                continue
            parts.append(
                {
                    "content_type": part.get_content_type(),
                    "content": part.get_content(),
                }
            )
        auth = session.auth_data
        login = auth.login.decode("utf-8", "replace") if auth is not None else None
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "login": login,
            # STARTTLS sets session.ssl; implicit TLS shows on the transport.
            "tls": session.ssl is not None
            or server.transport.get_extra_info("ssl_object") is not None,
            "headers": {name.lower(): str(value) for name, value in message.items()},
            "content_type": message.get_content_type(),
            "parts": parts,
            "raw": raw.decode("utf-8", "replace"),
        }
        with self.lock:
            self.count += 1
            name = "%04d.json" % self.count
        tmp = os.path.join(self.directory, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(tmp, os.path.join(self.directory, name))
        return "250 Message accepted for delivery"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            auth_data.login.decode("utf-8") == user
            and auth_data.password.decode("utf-8") == password
        )
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    return check


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--implicit-tls", action="store_true")
    args = parser.parse_args()

    kwargs = {}
    context = None
    if args.cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
    if args.user is not None:
        kwargs["authenticator"] = authenticator(args.user, args.password or "")
        kwargs["auth_required"] = True
        # Plaintext AUTH is what `?tls=none` tests; with TLS on it is
        # required anyway.
        kwargs["auth_require_tls"] = context is not None
    if context is not None and not args.implicit_tls:
        kwargs["tls_context"] = context
        kwargs["require_starttls"] = True

    controller = Controller(
        Saver(args.dir),
        hostname="127.0.0.1",
        port=args.port,
        ssl_context=context if args.implicit_tls else None,
        **kwargs,
    )
    controller.start()
    print("READY %d" % args.port, flush=True)
    try:
        sys.stdin.read()
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
