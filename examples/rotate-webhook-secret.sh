#!/usr/bin/env bash
# Rotates a webhook subscription's signing secret. The answer shows the new secret once: store it
# beside the old one, which keeps signing until previous_secret_expires_at (GRACE seconds, 0 to
# 604800; 24 hours when unset). Needs KEY (your API key) and WEBHOOK (the subscription id).
set -euo pipefail
: "${KEY:?set KEY to your API key}" "${WEBHOOK:?set WEBHOOK to the subscription id}"
URL=${URL:-http://localhost:8080}
# Sent again with the same key, the request answers the same secret and rotates once.
IDEMPOTENCY_KEY=$(node -p 'crypto.randomUUID()')

curl -s --fail-with-body --retry 3 -X POST "$URL/api/v1/webhooks/$WEBHOOK/secret/rotate" -H "Authorization: Bearer $KEY" \
  -H 'Content-Type: application/json' -H "Idempotency-Key: $IDEMPOTENCY_KEY" -d "{\"grace_period_seconds\": ${GRACE:-86400}}"
echo
