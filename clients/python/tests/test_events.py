"""Parsing envelopes into the generated dataclasses."""
import json

import pytest

from conftest import body_of
from support_platform import EVENT_TYPES, EventParseError, WebhookVerificationError, parse_event, receive
from support_platform.events import MessageCreatedData, MessageCreatedDataMediaItem, TicketCreatedData


def with_data(good, **data):
    envelope = json.loads(body_of(good))
    envelope["data"].update(data)
    return json.dumps(envelope).encode("utf-8")


def test_a_verified_delivery_parses_into_its_dataclass(good):
    event = receive(body_of(good), good["headers"], good["secrets"], now=good["now"])
    assert event.type == "ticket.created"
    assert isinstance(event.data, TicketCreatedData)
    assert event.data.status == "new"
    assert event.data.subject == "Printer on fire"
    assert event.links["ticket"].startswith("/api/v1/tickets/")


def test_a_delivery_that_fails_verification_is_not_parsed(good):
    with pytest.raises(WebhookVerificationError):
        receive(with_data(good, subject="x"), good["headers"], good["secrets"], now=good["now"])


def test_nested_objects_become_their_dataclasses(good):
    envelope = json.loads(body_of(good))
    envelope["type"] = "message.created"
    envelope["data"] = {
        "id": "m1", "message_id": "m1", "ticket_id": "t1", "sender_type": "contact", "sender_id": None,
        "sender_name": None, "content": "hi", "is_internal": False, "created_at": "2026-01-01T00:00:00",
        "media": [{"url": "/api/v1/media/f1", "size": 3}],
    }
    event = parse_event(json.dumps(envelope))
    assert isinstance(event.data, MessageCreatedData)
    assert event.data.media == [MessageCreatedDataMediaItem(url="/api/v1/media/f1", size=3)]
    assert event.data.media[0].file_name is None


def test_data_that_breaks_its_schema_is_refused_naming_the_field(good):
    with pytest.raises(EventParseError, match=r"\$\.data\.status: not one of"):
        parse_event(with_data(good, status="lost"))
    with pytest.raises(EventParseError, match=r"\$\.data\.subject: matches none"):
        parse_event(with_data(good, subject=7))
    envelope = json.loads(body_of(good))
    del envelope["data"]["ticket_id"]
    with pytest.raises(EventParseError, match=r"\$\.data\.ticket_id: missing"):
        parse_event(json.dumps(envelope))


def test_an_envelope_without_its_fields_or_a_body_that_is_not_json_is_refused():
    with pytest.raises(EventParseError, match=r"\$\.id: missing"):
        parse_event(b'{"type":"ticket.created"}')
    with pytest.raises(EventParseError, match="not JSON"):
        parse_event(b'{"id":')
    with pytest.raises(EventParseError):
        parse_event(b"\xff\xfe")


def test_a_type_the_helpers_do_not_know_keeps_its_data_as_a_dict(good):
    envelope = json.loads(body_of(good))
    envelope.update(type="webhook.test", data={"anything": [1]})
    event = parse_event(json.dumps(envelope))
    assert event.data == {"anything": [1]}
    assert "ticket.created" in EVENT_TYPES and "webhook.test" not in EVENT_TYPES
