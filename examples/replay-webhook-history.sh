#!/usr/bin/env bash
# Sends a webhook subscription's history again, from SINCE (an ISO 8601 instant, or an offset in µs
# as /updates gives them; the last hour when unset) up to now, then follows the replay until every
# delivery is settled. ONLY_FAILED=true sends again only the deliveries that ended failed.
# Needs KEY (your API key) and WEBHOOK (the subscription id).
set -euo pipefail
: "${KEY:?set KEY to your API key}" "${WEBHOOK:?set WEBHOOK to the subscription id}"
URL=${URL:-http://localhost:8080}
SINCE=${SINCE:-$(node -p 'new Date(Date.now() - 3600e3).toISOString()')}
[[ $SINCE =~ ^[0-9]+$ ]] || SINCE="\"$SINCE\""

replay=$(curl -s --fail-with-body -X POST "$URL/api/v1/webhooks/$WEBHOOK/replay" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -d "{\"since\": $SINCE, \"only_failed\": ${ONLY_FAILED:-false}}")
echo "$replay"
id=$(node -p 'JSON.parse(process.argv[1]).id' "$replay")
# matched: events of the range found so far; sent: deliveries attempted; delivered and failed: settled.
while :; do
  progress=$(curl -s --fail-with-body "$URL/api/v1/webhooks/$WEBHOOK/replays/$id" -H "Authorization: Bearer $KEY")
  echo "$progress"
  node -e 'const p = JSON.parse(process.argv[1]); process.exit(p.status === "cancelled" || (p.status === "completed" && p.delivered + p.failed >= p.matched) ? 0 : 1)' "$progress" && break
  sleep 1
done
