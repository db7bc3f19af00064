"""The event envelope every webhook and /updates item carries, its data turned into the generated
dataclass of its type."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .events import EVENT_DATA_CLASSES, EVENT_SCHEMAS, EventData
from .schema import mismatch
from .signature import DEFAULT_TOLERANCE_SECONDS, Headers, Secrets, verify_standard

_ENVELOPE = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "type": {"type": "string"},
        "timestamp": {"type": "string"},
        "workspace_id": {"type": "string"},
        "data": {"type": "object"},
        "_links": {"type": "object"},
    },
    "required": ["id", "type", "timestamp", "workspace_id", "data", "_links"],
}


class EventParseError(ValueError):
    """A body that is not an event envelope, or whose data breaks its type's schema."""


@dataclass(frozen=True)
class Event:
    """One event. ``data`` is the dataclass of its type (``TicketCreatedData`` for "ticket.created"),
    or the plain dict for a type newer than these helpers (and for "webhook.test")."""

    id: str
    type: str
    timestamp: str
    workspace_id: str
    data: Union[EventData, dict[str, Any]]
    links: dict[str, str]
    # The position in /updates (set on items of the long poll, None on webhooks).
    offset: Optional[int] = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def to_event(value: Any) -> Event:
    """Checks a parsed JSON value as an envelope; a known type's data must match its schema."""
    found = mismatch(_ENVELOPE, value)
    if found is not None:
        raise EventParseError(f"not an event envelope: {found}")
    kind = value["type"]
    data: Union[EventData, dict[str, Any]] = value["data"]
    if kind in EVENT_SCHEMAS:
        found = mismatch(EVENT_SCHEMAS[kind], value["data"], "$.data")
        if found is not None:
            raise EventParseError(f"{kind}: {found}")
        data = EVENT_DATA_CLASSES[kind].from_dict(value["data"])
    offset = value.get("offset")
    return Event(
        id=value["id"],
        type=kind,
        timestamp=value["timestamp"],
        workspace_id=value["workspace_id"],
        data=data,
        links=value["_links"],
        offset=offset if isinstance(offset, int) else None,
        raw=value,
    )


def parse_event(body: Union[bytes, str]) -> Event:
    """Parses the body bytes of a delivery (after verification) into an Event."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise EventParseError(f"the body is not JSON: {error}") from error
    return to_event(value)


def receive(
    body: Union[bytes, str],
    headers: Headers,
    secrets: Secrets,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: Optional[int] = None,
) -> Event:
    """Verifies a delivery's Standard Webhooks headers (signature and timestamp) and parses its body."""
    verify_standard(body, headers, secrets, tolerance_seconds=tolerance_seconds, now=now)
    return parse_event(body)
