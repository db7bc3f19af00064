#!/usr/bin/env bash
# A lost API key cannot be shown again (only its hash is kept): issue a new one.
# Needs WORKSPACE (the workspace id) and the service's ADMIN_TOKEN.
set -euo pipefail
: "${WORKSPACE:?set WORKSPACE to the workspace id}" "${ADMIN_TOKEN:?start the service with ADMIN_TOKEN and set it here too}"
URL=${URL:-http://localhost:8080}

curl -s --fail-with-body -X POST "$URL/admin/v1/workspaces/$WORKSPACE/keys" -H "Authorization: Bearer $ADMIN_TOKEN"
echo
