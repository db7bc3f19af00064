"""Webhook verification over the body bytes exactly as received (before any JSON parsing: a
re-serialised body has another signature), for both schemes the server signs every delivery with:

- X-Webhook-Signature: ``sha256=<hex HMAC-SHA256 of the body>``, keyed with the secret string as written;
- Standard Webhooks: ``webhook-signature`` holds space-separated ``v1,<base64 HMAC-SHA256 of
  "<webhook-id>.<webhook-timestamp>.<body>">``, keyed with the base64 decoding of the secret after
  ``whsec_``; several during a secret rotation, any valid one passes, other versions are ignored.

Digests are compared in constant time (hmac.compare_digest).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from email.message import Message
from typing import Literal, Mapping, Optional, Sequence, Union

DEFAULT_TOLERANCE_SECONDS = 300

Reason = Literal["headers", "signature", "timestamp"]
Secrets = Union[str, Sequence[str]]
# A dict, or the headers of http.server and urllib (an email Message): names in any case.
Headers = Union[Mapping[str, str], Message]

_CONTRACT = re.compile(r"sha256=([0-9a-fA-F]{64})")
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_INTEGER = re.compile(r"[0-9]+")


class WebhookVerificationError(Exception):
    """A delivery that must not be trusted. ``reason``: a header is missing or malformed
    ("headers"), no signature matches ("signature"), or the timestamp is outside the tolerance
    ("timestamp")."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def _secrets(secrets: Secrets) -> Sequence[str]:
    return [secrets] if isinstance(secrets, str) else secrets


def _bytes(body: Union[bytes, str]) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else body


def _header(headers: Headers, name: str) -> Optional[str]:
    value = headers.get(name)
    if value is not None:
        return value
    return next((v for k, v in headers.items() if k.lower() == name), None)


def verify_signature(body: Union[bytes, str], signature: Optional[str], secrets: Secrets) -> None:
    """Checks X-Webhook-Signature against the body with any of the secrets (the previous one too,
    during a rotation). Raises WebhookVerificationError."""
    if signature is None or signature.strip() == "":
        raise WebhookVerificationError("headers", "X-Webhook-Signature is missing")
    match = _CONTRACT.fullmatch(signature.strip())
    if match is None:
        raise WebhookVerificationError("signature", "X-Webhook-Signature is not sha256=<64 hex digits>")
    sent = bytes.fromhex(match.group(1))
    data = _bytes(body)
    if not any(hmac.compare_digest(sent, hmac.new(s.encode("utf-8"), data, hashlib.sha256).digest()) for s in _secrets(secrets)):
        raise WebhookVerificationError("signature", "X-Webhook-Signature matches none of the secrets")


def standard_key(secret: str) -> bytes:
    """The Standard Webhooks key: the base64 (or, for older secrets, base64url) after ``whsec_``."""
    encoded = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    encoded = encoded.replace("-", "+").replace("_", "/").rstrip("=")
    return base64.b64decode(encoded + "=" * (-len(encoded) % 4))


def _decoded(signature: str) -> Optional[bytes]:
    if not signature.startswith("v1,") or _BASE64.fullmatch(signature[3:]) is None:
        return None
    try:
        return base64.b64decode(signature[3:], validate=True)
    except binascii.Error:
        return None


def verify_standard(
    body: Union[bytes, str],
    headers: Headers,
    secrets: Secrets,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: Optional[int] = None,
) -> None:
    """Checks the Standard Webhooks headers against the body with any of the secrets; the timestamp
    may lie ``tolerance_seconds`` from ``now`` (Unix seconds, the system clock by default), in the
    past or the future. Raises WebhookVerificationError."""
    msg_id = _header(headers, "webhook-id")
    timestamp = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if msg_id is None or timestamp is None or signatures is None:
        raise WebhookVerificationError("headers", "webhook-id, webhook-timestamp and webhook-signature are all needed")
    if _INTEGER.fullmatch(timestamp) is None:
        raise WebhookVerificationError("headers", "webhook-timestamp is not an integer")
    clock = int(time.time()) if now is None else now
    if abs(clock - int(timestamp)) > tolerance_seconds:
        raise WebhookVerificationError("timestamp", f"webhook-timestamp is more than {tolerance_seconds} s from now")
    sent = [s for s in (_decoded(part) for part in signatures.split(" ")) if s is not None]
    signed = f"{msg_id}.{timestamp}.".encode("utf-8") + _bytes(body)
    for secret in _secrets(secrets):
        try:
            key = standard_key(secret)
        except binascii.Error:
            continue  # not a whsec_ secret: it matches nothing
        expected = hmac.new(key, signed, hashlib.sha256).digest()
        if any(hmac.compare_digest(expected, s) for s in sent):
            return
    raise WebhookVerificationError("signature", "no v1 signature in webhook-signature matches the secrets")
