#!/usr/bin/env bash
# History for analysts while the service runs: one workspace (the key's) through the API, as NDJSON.
# Run from the repository's folder.
set -euo pipefail
: "${KEY:?set KEY to your API key}"
URL=${URL:-http://localhost:8080}

npx tsx scripts/export.ts --url "$URL" --key "$KEY" --types ticket.created,ticket.closed --from 2026-11-01T00:00:00Z --out tickets.ndjson
head -c 300 tickets.ndjson
echo
