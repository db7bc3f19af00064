"""Schemathesis over every operation of the API document a live server serves.

SP_BASE_URL is the server's origin (http://127.0.0.1:8080) and SP_API_KEY a workspace's API key;
test/openapi/fuzz.e2e.spec.ts starts a server and runs this, and it runs as well against any server:

    SP_BASE_URL=http://127.0.0.1:8080 SP_API_KEY=sk_... python -m pytest test/openapi/fuzz
"""

import os
from pathlib import Path

# Hypothesis' caches go under .cache with the venv, not into the work tree (read when first used).
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(__file__).parents[3] / ".cache" / "hypothesis"))

import schemathesis  # noqa: E402

config = schemathesis.Config.from_path(Path(__file__).with_name("schemathesis.toml"))
schema = schemathesis.openapi.from_url(f"{os.environ['SP_BASE_URL']}/api/v1/openapi.json", config=config)


@schema.parametrize()
def test_operation(case):
    case.call_and_validate()
