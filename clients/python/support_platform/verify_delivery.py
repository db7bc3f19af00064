"""python -m support_platform.verify_delivery < delivery.json

Checks a saved delivery: reads {"secrets": [...], "body_base64": "...", "headers": {...}} (the shape
of the shared test vectors; "now" in Unix seconds is optional) on stdin, prints what each scheme
says and the parsed event as JSON, and exits 0 only when both signatures verify and the body parses."""
from __future__ import annotations

import base64
import json
import sys
from typing import Any

from .event import EventParseError, parse_event
from .signature import WebhookVerificationError, verify_signature, verify_standard


def check(delivery: dict[str, Any]) -> dict[str, Any]:
    body = base64.b64decode(delivery["body_base64"])
    headers = {k.lower(): v for k, v in delivery["headers"].items()}
    outcome: dict[str, Any] = {}
    try:
        verify_signature(body, headers.get("x-webhook-signature"), delivery["secrets"])
        outcome["x_webhook_signature"] = "valid"
    except WebhookVerificationError as error:
        outcome["x_webhook_signature"] = error.reason
    try:
        verify_standard(body, headers, delivery["secrets"], now=delivery.get("now"))
        outcome["standard_webhooks"] = "valid"
    except WebhookVerificationError as error:
        outcome["standard_webhooks"] = error.reason
    try:
        event = parse_event(body)
        outcome["event"] = {"id": event.id, "type": event.type, "typed": type(event.data).__name__}
    except EventParseError as error:
        outcome["event"] = {"error": str(error)}
    return outcome


def main() -> int:
    outcome = check(json.load(sys.stdin))
    print(json.dumps(outcome))
    ok = outcome["x_webhook_signature"] == outcome["standard_webhooks"] == "valid" and "error" not in outcome["event"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
