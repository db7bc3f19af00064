#!/usr/bin/env bash
# The OpenAPI fuzzer's Python (test/openapi/fuzz): a venv in .cache/openapi-fuzz-venv holding the pinned
# test/openapi/fuzz/requirements.txt, installed with pip only when missing or when the pins changed.
# Prints the venv's python. Needs Python 3.10+ with venv and pip, and PyPI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=.cache/openapi-fuzz-venv
wanted=test/openapi/fuzz/requirements.txt
if ! cmp -s "$wanted" "$venv/installed-requirements.txt"; then
  echo "openapi-fuzz-venv.sh: installing $wanted into $venv with pip" >&2
  mkdir -p .cache
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$wanted" >&2
  # Written last: an interrupted install is retried next time.
  cp "$wanted" "$venv/installed-requirements.txt"
fi
echo "$PWD/$venv/bin/python"
