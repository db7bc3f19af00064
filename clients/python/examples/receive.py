"""Receive your first webhook: verifies each delivery, prints its event, answers 204 (401 when forged).

    WEBHOOK_SECRET=whsec_... PORT=3000 python3 receive.py
"""
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from support_platform import EventParseError, WebhookVerificationError, receive
from support_platform.events import TicketCreatedData

SECRET = os.environ.get("WEBHOOK_SECRET", "")  # the secret POST /api/v1/webhooks answered


class Webhook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        # The bytes as received, before any JSON parsing: a re-serialised body has another signature.
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            event = receive(body, self.headers, SECRET)
        except (WebhookVerificationError, EventParseError) as error:
            print(f"refused: {error}", flush=True)
            self.send_response(401 if isinstance(error, WebhookVerificationError) else 400)
            self.end_headers()
            return
        if isinstance(event.data, TicketCreatedData):
            print(f"new ticket {event.data.ticket_id}: {event.data.subject or '(no subject)'}", flush=True)
        print(f"{event.type} {event.id}", flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass  # one line per event is enough


server = HTTPServer(("127.0.0.1", int(os.environ.get("PORT", 3000))), Webhook)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
