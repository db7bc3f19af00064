"""Poll your first update: prints every event of the workspace from the start of its history, then
waits for new ones (Ctrl-C to stop).

    API_URL=http://localhost:8080 API_KEY=sk_... python3 poll.py
"""
import os

from support_platform import Updates
from support_platform.events import MessageCreatedData

poll = Updates(os.environ.get("API_URL", "http://localhost:8080"), os.environ.get("API_KEY", ""), offset=0)
for event in poll:
    if isinstance(event.data, MessageCreatedData):
        print(f"  {event.data.sender_type} wrote: {event.data.content}", flush=True)
    print(f"{event.offset} {event.type} {event.id}", flush=True)
    # poll.offset is where to resume: store it to carry on after a restart.
