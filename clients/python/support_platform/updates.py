"""A long-poll iterator over GET /api/v1/updates: yields events in log order and keeps the offset
(the one to resume from after the last event yielded), waits as told by 429 and 503 Retry-After,
backs off exponentially on other 5xx and network errors, and raises on any other answer (a bad key,
a bad query), which retrying would not fix."""
from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterator, Optional, Sequence

from .event import Event, to_event


class UpdatesError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"GET /api/v1/updates answered {status}: {body}")
        self.status = status
        self.body = body


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds: delay-seconds or an HTTP date; None when absent or unreadable."""
    if value is None or value.strip() == "":
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        date = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, date.timestamp() - (time.time() if now is None else now))


class Updates:
    """``for event in Updates(url, api_key): ...`` yields every event from ``offset`` on, forever.
    ``offset`` (microseconds, inclusive: 0 for the whole history, ``time.time_ns() // 1000`` for
    from now on) moves past each event as it is yielded: store it to resume after a restart."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        offset: int = 0,
        types: Sequence[str] = (),
        timeout_seconds: int = 30,
        initial_delay: float = 1.0,
        max_delay: float = 30.0,
    ) -> None:
        self.url = url
        self.api_key = api_key
        self.offset = offset
        self.types = list(types)
        self.timeout_seconds = timeout_seconds
        self.initial_delay = initial_delay
        self.max_delay = max_delay

    def _request(self) -> urllib.request.Request:
        query = {"offset": str(self.offset), "timeout": str(self.timeout_seconds)}
        if self.types:
            query["types"] = ",".join(self.types)
        address = urllib.parse.urljoin(self.url, "/api/v1/updates") + "?" + urllib.parse.urlencode(query)
        return urllib.request.Request(address, headers={"Authorization": f"Bearer {self.api_key}"})

    def _page(self) -> dict[str, Any]:
        """One page of events, after as many retries as transient failures need."""
        delay = self.initial_delay
        while True:
            told: Optional[float] = None
            try:
                with urllib.request.urlopen(self._request(), timeout=self.timeout_seconds + 30) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                body = error.read().decode("utf-8", "replace")
                if error.code != 429 and error.code < 500:
                    raise UpdatesError(error.code, body) from None
                told = retry_after_seconds(error.headers.get("Retry-After"))
            except (urllib.error.URLError, OSError):
                pass  # the service is down or restarting: back off
            time.sleep(min(delay if told is None else told, self.max_delay))
            if told is None:
                delay = min(delay * 2, self.max_delay)

    def __iter__(self) -> Iterator[Event]:
        while True:
            page = self._page()
            for item in page["items"]:
                event = to_event(item)
                # Before the yield: a consumer that stops at this event never resumes the generator.
                self.offset = item["offset"] + 1
                yield event
            self.offset = max(self.offset, page["next_offset"])
