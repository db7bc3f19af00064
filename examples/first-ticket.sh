#!/usr/bin/env bash
# Create a ticket, list the tickets, then read the events it caused from /api/v1/updates.
# Needs KEY (the API key npm start printed); URL defaults to http://localhost:8080.
set -euo pipefail
: "${KEY:?set KEY to your API key (npm start prints it at the first start)}"
URL=${URL:-http://localhost:8080}
json() { node -pe "JSON.parse(require('fs').readFileSync(0, 'utf8'))$1"; }

# Offsets are microseconds since the epoch: this moment, so the poll below starts from now.
START=$(( $(date +%s) * 1000000 ))

curl -s --fail-with-body "$URL/api/v1/tickets" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"subject": "Cannot log in", "contact": {"email": "ada@example.com", "full_name": "Ada"}, "message": "Hello!"}' | tee ticket.json
echo
TICKET=$(json .id < ticket.json)
curl -s --fail-with-body "$URL/api/v1/tickets/$TICKET" -H "Authorization: Bearer $KEY"
echo
curl -s --fail-with-body "$URL/api/v1/tickets?page_size=5" -H "Authorization: Bearer $KEY"
echo
# Long polling: answers at once when events exist at or after offset, else waits up to timeout s.
curl -s --fail-with-body "$URL/api/v1/updates?offset=$START&types=ticket.created&timeout=5" -H "Authorization: Bearer $KEY"
echo
