#!/usr/bin/env bash
# History from the data folder of a STOPPED service (a running one holds the log): any workspace or
# all of them, and a rebuild of every read model as a check. Run from the repository's folder.
set -euo pipefail
: "${WORKSPACE:?set WORKSPACE to a workspace id}"
DATA_DIR=${DATA_DIR:-./data}

npx tsx scripts/export.ts --data-dir "$DATA_DIR" --workspace "$WORKSPACE" --from 0 --out history.ndjson
npx tsx scripts/export.ts --data-dir "$DATA_DIR" --from 2026-11-01T00:00:00Z --types ticket.created | wc -l
npx tsx scripts/rebuild.ts --data-dir "$DATA_DIR"
