#!/usr/bin/env bash
# The knowledge base needs a plan that includes it (team or business by default; the first
# workspace starts on the entry plan, free). An administrator changes the plan, then articles work.
# Needs KEY, WORKSPACE (the workspace id npm start printed) and ADMIN_TOKEN (the service's).
set -euo pipefail
: "${KEY:?set KEY to your API key}" "${WORKSPACE:?set WORKSPACE to your workspace id}" "${ADMIN_TOKEN:?start the service with ADMIN_TOKEN and set it here too}"
URL=${URL:-http://localhost:8080}
json() { node -pe "JSON.parse(require('fs').readFileSync(0, 'utf8'))$1"; }

curl -s --fail-with-body -X PATCH "$URL/admin/v1/workspaces/$WORKSPACE" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -H 'Content-Type: application/json' -d '{"plan": "team"}'
echo
ARTICLE=$(curl -s --fail-with-body "$URL/api/v1/articles" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"title": "Resetting a password", "body": "Open Settings, then Security."}' | json .id)
curl -s --fail-with-body -X PATCH "$URL/api/v1/articles/$ARTICLE" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"body": "Open Settings, then Security, then Reset."}'
echo
curl -s --fail-with-body "$URL/api/v1/articles?page=1&page_size=20" -H "Authorization: Bearer $KEY"
echo
