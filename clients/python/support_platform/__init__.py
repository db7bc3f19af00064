"""Verify the support platform's webhooks, parse them into typed events, long-poll /api/v1/updates."""
from .event import Event, EventParseError, parse_event, receive, to_event
from .events import EVENT_DATA_CLASSES, EVENT_SCHEMAS, EVENT_TYPES
from .signature import DEFAULT_TOLERANCE_SECONDS, WebhookVerificationError, standard_key, verify_signature, verify_standard
from .updates import Updates, UpdatesError, retry_after_seconds

__all__ = [
    "DEFAULT_TOLERANCE_SECONDS",
    "EVENT_DATA_CLASSES",
    "EVENT_SCHEMAS",
    "EVENT_TYPES",
    "Event",
    "EventParseError",
    "Updates",
    "UpdatesError",
    "WebhookVerificationError",
    "parse_event",
    "receive",
    "retry_after_seconds",
    "standard_key",
    "to_event",
    "verify_signature",
    "verify_standard",
]
