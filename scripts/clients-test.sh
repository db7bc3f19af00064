#!/usr/bin/env bash
# Body of `npm run clients:test`, and part of `npm test`: each client helper (clients/typescript,
# clients/python, clients/go) type-checked and tested with its own runner, on the shared vectors.
# Needs Node, Python 3.10+ and Go; pytest is installed with pip when missing (once: later runs find it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! python3 -m pytest --version >/dev/null 2>&1; then
  echo "clients-test.sh: pytest missing, installing it with pip" >&2
  python3 -m pip install --quiet --disable-pip-version-check pytest
fi
command -v go >/dev/null || { echo "clients-test.sh: Go is needed for clients/go (https://go.dev/dl)" >&2; exit 1; }

echo "== clients/typescript (node --test)"
npx tsc -p clients/typescript
(cd clients/typescript && node --import tsx --test --test-reporter=dot test/*.test.ts)

echo "== clients/python (pytest)"
(cd clients/python && python3 -m pytest -q -p no:cacheprovider)

echo "== clients/go (go test)"
(cd clients/go && unformatted="$(gofmt -l .)" && { [ -z "$unformatted" ] || { echo "gofmt: $unformatted" >&2; exit 1; }; } && go vet ./... && go test -count=1 ./...)
