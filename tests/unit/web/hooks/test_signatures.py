"""``verify_signature``: GitHub's HMAC-SHA256 webhook signatures, failing closed.

Aspects covered:
* GitHub's documented test vector verifies (and ``sign`` reproduces it);
* one changed body byte, a wrong secret, a ``sha1=`` prefix, a missing or empty
  header, a truncated or non-hex digest are each refused;
* no secrets, or an empty secret among them, refuse everything (even a matching HMAC);
* rotation: either of two secrets verifies; a third configured secret is ignored;
* property: any body signed with the secret verifies, any other secret does not.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentchain.web.hooks.signatures import sign, verify_signature

SECRET = "It's a Secret to Everybody"
BODY = b"Hello, World!"
SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_documented_vector_verifies() -> None:
    assert verify_signature(BODY, SIGNATURE, [SECRET])
    assert sign(BODY, SECRET) == SIGNATURE


def test_uppercase_hex_digest_verifies() -> None:
    assert verify_signature(BODY, "sha256=" + SIGNATURE[7:].upper(), [SECRET])


@pytest.mark.parametrize("index", [0, 6, len(BODY) - 1])
def test_one_changed_byte_is_refused(index: int) -> None:
    changed = bytearray(BODY)
    changed[index] ^= 0x01
    assert not verify_signature(bytes(changed), SIGNATURE, [SECRET])


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        SIGNATURE[7:],  # no prefix
        "sha1=" + SIGNATURE[7:],
        "SHA256=" + SIGNATURE[7:],
        SIGNATURE[:-1],  # truncated
        SIGNATURE[:-1] + "g",  # not hex
        SIGNATURE + "00",
        "sha256=" + "é" * 64,
    ],
    ids=["missing", "empty", "bare", "sha1", "upper-prefix", "short", "non-hex", "long", "utf8"],
)
def test_malformed_headers_are_refused(header: str | None) -> None:
    assert not verify_signature(BODY, header, [SECRET])


def test_wrong_secret_is_refused() -> None:
    assert not verify_signature(BODY, SIGNATURE, ["It's a Secret to Nobody"])


@pytest.mark.parametrize("secrets", [[], [""], ["", SECRET], [SECRET, ""]])
def test_missing_or_empty_secrets_refuse_everything(secrets: list[str]) -> None:
    assert not verify_signature(BODY, SIGNATURE, secrets)
    assert not verify_signature(BODY, sign(BODY, ""), secrets)


def test_rotation_accepts_either_of_two_secrets() -> None:
    new = "the new secret"
    assert verify_signature(BODY, SIGNATURE, [new, SECRET])
    assert verify_signature(BODY, sign(BODY, new), [new, SECRET])
    assert verify_signature(BODY, sign(BODY, new), [SECRET, new])


def test_only_two_secrets_are_live() -> None:
    third = "a third secret"
    assert not verify_signature(BODY, sign(BODY, third), ["one", "two", third])


@given(body=st.binary(max_size=512), secret=st.text(min_size=1), other=st.text(min_size=1))
def test_signed_bodies_verify_only_with_their_secret(body: bytes, secret: str, other: str) -> None:
    assert verify_signature(body, sign(body, secret), [secret])
    if other != secret:
        assert not verify_signature(body, sign(body, secret), [other])
