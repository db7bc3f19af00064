"""The long-poll iterator against a real local HTTP server that answers as each test scripts it."""
import json
import threading
import urllib.parse
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support_platform import Updates, UpdatesError, retry_after_seconds


def item(offset, kind="ticket.updated"):
    return {"id": f"e{offset}", "type": kind, "timestamp": "2026-01-01T00:00:00.000000+00:00", "workspace_id": "w1",
            "data": {"ticket_id": "t1"}, "_links": {}, "offset": offset}


def answer(status, body, headers=None):
    return ("answer", status, json.dumps(body).encode("utf-8"), headers or {})


DROP = ("drop",)


@pytest.fixture
def scripted():
    servers = []

    def start(answers):
        requests = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                requests.append((self.path, self.headers.get("Authorization")))
                script = answers.pop(0) if len(answers) > 1 else answers[0]
                if script[0] == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                _, status, body, headers = script
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", requests

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def offsets(requests):
    return [urllib.parse.parse_qs(urllib.parse.urlparse(path).query)["offset"][0] for path, _ in requests]


def take(iterable, count):
    got = []
    for event in iterable:
        got.append(event)
        if len(got) == count:
            break
    return got


def test_events_across_pages_each_page_asked_from_the_previous_next_offset(scripted):
    url, requests = scripted([
        answer(200, {"items": [item(10), item(11)], "next_offset": 12}),
        answer(200, {"items": [], "next_offset": 12}),
        answer(200, {"items": [item(20)], "next_offset": 21}),
    ])
    poll = Updates(url, "k", offset=5, types=["ticket.updated", "ticket.created"], timeout_seconds=1)
    assert [e.offset for e in take(poll, 3)] == [10, 11, 20]
    assert offsets(requests) == ["5", "12", "12"]
    assert poll.offset == 21
    query = urllib.parse.parse_qs(urllib.parse.urlparse(requests[0][0]).query)
    assert query["types"] == ["ticket.updated,ticket.created"]
    assert requests[0][1] == "Bearer k"


def test_a_consumer_that_stops_mid_page_resumes_after_the_last_event_it_took(scripted):
    url, _ = scripted([answer(200, {"items": [item(10), item(11), item(12)], "next_offset": 13})])
    poll = Updates(url, "k")
    take(poll, 2)
    assert poll.offset == 12


def test_429_503_5xx_and_network_errors_are_retried_keeping_the_offset(scripted):
    url, requests = scripted([
        answer(429, {"error_code": "RATE_LIMIT_EXCEEDED"}, {"Retry-After": "0"}),
        answer(503, {"error_code": "SERVICE_UNAVAILABLE"}, {"Retry-After": "0"}),
        answer(500, {"error_code": "INTERNAL_ERROR"}),
        DROP,
        answer(502, "bad gateway"),
        answer(200, {"items": [item(30)], "next_offset": 31}),
    ])
    poll = Updates(url, "k", offset=30, initial_delay=0.001, max_delay=0.004)
    assert [e.id for e in take(poll, 1)] == ["e30"]
    assert offsets(requests) == ["30"] * 6


def test_an_answer_retrying_cannot_fix_is_raised_with_its_status_and_body(scripted):
    url, requests = scripted([answer(401, {"detail": "Invalid API key"})])
    with pytest.raises(UpdatesError) as refused:
        take(Updates(url, "bad"), 1)
    assert refused.value.status == 401 and "Invalid API key" in refused.value.body
    assert len(requests) == 1


def test_retry_after_reads_seconds_and_http_dates_and_nothing_else():
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(formatdate(61.0, usegmt=True), now=1.0) == 60.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
