"""The shared vectors (clients/test-vectors.json), made with the server's signing code."""
import pytest

from conftest import VECTORS, body_of, vector
from support_platform import WebhookVerificationError, verify_signature, verify_standard


def check(v):
    body = body_of(v)
    if v["scheme"] == "x-webhook-signature":
        verify_signature(body, v["headers"].get("x-webhook-signature"), v["secrets"])
    else:
        verify_standard(body, v["headers"], v["secrets"], now=v["now"], tolerance_seconds=VECTORS["tolerance_seconds"])


def test_vectors_hold_valid_and_invalid_cases_of_both_schemes():
    for scheme in ("x-webhook-signature", "standard-webhooks"):
        outcomes = {v["valid"] for v in VECTORS["vectors"] if v["scheme"] == scheme}
        assert outcomes == {True, False}


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: f"{v['scheme']}: {v['name']}")
def test_vector(v):
    if v["valid"]:
        check(v)
        return
    with pytest.raises(WebhookVerificationError) as refused:
        check(v)
    assert refused.value.reason == v["error"]


def test_a_str_body_verifies_as_its_utf8_bytes():
    v = vector("standard-webhooks", "unicode body")
    verify_standard(body_of(v).decode("utf-8"), v["headers"], v["secrets"], now=v["now"])


def test_the_default_tolerance_is_five_minutes_against_the_system_clock(good):
    body = body_of(good)
    verify_standard(body, good["headers"], good["secrets"], now=good["now"] + 300)
    with pytest.raises(WebhookVerificationError, match="300 s"):
        verify_standard(body, good["headers"], good["secrets"], now=good["now"] + 301)
    # The vectors' clock is in the past: the system clock refuses them.
    with pytest.raises(WebhookVerificationError) as refused:
        verify_standard(body, good["headers"], good["secrets"])
    assert refused.value.reason == "timestamp"


def test_headers_are_found_whatever_their_case(good):
    upper = {k.upper(): v for k, v in good["headers"].items()}
    verify_standard(body_of(good), upper, good["secrets"], now=good["now"])
    with pytest.raises(WebhookVerificationError) as refused:
        verify_standard(body_of(good), {}, good["secrets"], now=good["now"])
    assert refused.value.reason == "headers"
