#!/usr/bin/env bash
# Upload a file, attach it to a message, and download it again.
set -euo pipefail
: "${KEY:?set KEY to your API key}"
URL=${URL:-http://localhost:8080}
json() { node -pe "JSON.parse(require('fs').readFileSync(0, 'utf8'))$1"; }

printf 'hello from a file\n' > note.txt
curl -s --fail-with-body "$URL/api/v1/media/upload" -H "Authorization: Bearer $KEY" -F 'file=@note.txt;type=text/plain' | tee media.json
echo
MEDIA=$(json .id < media.json)
# The answer's `url` is the address the chat widget uses; through the API, download with the key:
curl -s --fail-with-body "$URL/api/v1/media/$MEDIA" -H "Authorization: Bearer $KEY" -o downloaded.txt
cmp note.txt downloaded.txt && echo "downloaded $MEDIA: same bytes"

TICKET=$(curl -s --fail-with-body "$URL/api/v1/tickets" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"contact": {"email": "ada@example.com"}}' | json .id)
curl -s --fail-with-body "$URL/api/v1/tickets/$TICKET/messages" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d "{\"content\": \"Here is the note\", \"media_ids\": [\"$MEDIA\"]}"
echo
