"""The detectors of secrets and personal data: a precision corpus (every positive found, no
look-alike negative flagged), carried here, and the checks behind the shapes."""
from __future__ import annotations

import base64
import json
import random
import string
import time
from typing import List, Tuple

import pytest

from spanassert.assertions.detectors import DETECTORS, GROUPS, expand, iban_ok, luhn_ok, scan

_rng = random.Random(16)


def rand(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    while True:
        s = "".join(_rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and any(c.islower() for c in s):
            return s


def b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


JWT = f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64({'sub': '1234567890', 'iat': 1516239022})}.{rand(43)}"


def luhn_complete(prefix: str, length: int) -> str:
    body = prefix + "".join(_rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for d in string.digits:
        if luhn_ok(body + d):
            return body + d
    raise AssertionError("unreachable")


POSITIVES: List[Tuple[str, str]] = [
    # cloud access keys
    ("cloud_access_key", "AKIAIOSFODNN7EXAMPLE"),
    ("cloud_access_key", "key id: ASIAY34FZKBOKMUTVV7A, region us-east-1"),
    ("cloud_access_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("cloud_access_key", '{"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}'),
    ("cloud_access_key", "https://maps.googleapis.com/?key=AIza" + rand(35, string.ascii_letters + string.digits + "_-")),
    ("cloud_access_key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + rand(86, string.ascii_letters + string.digits + "+/") + "==;"),
    # private keys
    ("private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----"),
    ("private_key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"),
    ("private_key", "-----BEGIN PRIVATE KEY-----"),
    ("private_key", "-----BEGIN EC PRIVATE KEY-----"),
    ("private_key", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
    ("private_key", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
    # tokens
    ("jwt", JWT),
    ("jwt", f"token={JWT}&next=1"),
    ("bearer_token", "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("bearer_token", "authorization: bearer ya29.a0AfH6SMBx3k9Qz" + rand(40)),
    # model providers
    ("model_api_key", "sk-" + rand(48)),
    ("model_api_key", "OPENAI_API_KEY=sk-proj-" + rand(120, string.ascii_letters + string.digits + "_-")),
    ("model_api_key", "sk-svcacct-" + rand(64)),
    ("model_api_key", "x-api-key: sk-ant-api03-" + rand(93, string.ascii_letters + string.digits + "_-")),
    ("model_api_key", "gsk_" + rand(52)),
    ("model_api_key", "hf_" + rand(34)),
    ("model_api_key", "r8_" + rand(37)),
    ("model_api_key", "xai-" + rand(80)),
    ("model_api_key", "pplx-" + rand(48)),
    # payment cards
    ("credit_card", "4111111111111111"),
    ("credit_card", "card: 4111 1111 1111 1111, exp 12/29"),
    ("credit_card", "5555-5555-5555-4444"),
    ("credit_card", "5105105105105100"),
    ("credit_card", "2223003122003222"),
    ("credit_card", "amex 378282246310005"),
    ("credit_card", "3782 822463 10005"),
    ("credit_card", "6011111111111117"),
    ("credit_card", "3530111333300000"),
    ("credit_card", "30569309025904"),
    ("credit_card", "6200000000000005"),
    ("credit_card", "4222222222222"),
    ("credit_card", "pay with 4111 1111 1111 1111 12 months"),
    ("credit_card", luhn_complete("4", 16)),
    ("credit_card", luhn_complete("51", 16)),
    # IBAN
    ("iban", "DE89370400440532013000"),
    ("iban", "DE89 3704 0044 0532 0130 00"),
    ("iban", "IBAN: GB82 WEST 1234 5698 7654 32."),
    ("iban", "GB82WEST12345698765432"),
    ("iban", "FR1420041010050500013M02606"),
    ("iban", "NL91ABNA0417164300"),
    ("iban", "CH9300762011623852957"),
    ("iban", "BE68539007547034"),
    ("iban", "to DE89 3704 0044 0532 0130 00 EUR 50"),
    # e-mail
    ("email", "john.doe@example.com"),
    ("email", "Reply to <a+tag@sub.example.co.uk> please"),
    ("email", "x_y%z@mail-server.example.org"),
    ("email", "O'Brien: ob@example.ie"),
    # phone
    ("phone", "+1 415 555 0132"),
    ("phone", "call +44 20 7946 0958 today"),
    ("phone", "+4915112345678"),
    ("phone", "+33 1 23 45 67 89"),
    ("phone", "+1 (415) 555-0132"),
    ("phone", "(415) 555-0132"),
    ("phone", "415-555-0132"),
    ("phone", "Tel: 415.555.0132"),
]

# Look-alikes: text shaped like a secret or personal data that is not one. Nothing may be flagged.
NEGATIVES: List[str] = [
    # cloud
    "AKIA1234", "akiaiosfodnn7example", "AKIAIOSFODNN7EXAMPLEXYZ", "xAKIAIOSFODNN7EXAMPLE",
    "AIzaShortKey", "aws_secret_access_key = <your secret here>", "AccountKey=changeme",
    # private keys
    "-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ user@host",
    "put your BEGIN PRIVATE KEY block in the vault",
    # tokens
    "eyJhbGciOi.notajwt.x", "a.b.c", "version 1.2.3", "eyJub3QiOiJqd3QifQ.eyJub3QiOiJqd3QifQ.signature00",
    "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2lnbmF0dXJlMDAw",
    "Bearer token authentication", "the bearer of this letter", "Bearer <token>", "Bearer ${TOKEN}",
    "bearer abcdefghijklmnopqrstuvwxyz",
    # model keys
    "sk-learn", "sk-this-is-not-a-real-key-just-documentation-text", "risk-assessment-2024-quarterly-report-final-x",
    "task-1234567890abcdefghijklmnopqrstuvwxyzABCD", "hf_hub_download", "gsk_test", "r8_model",
    "sk-ant-api03-short", "xai-grok", "pplx-docs",
    "sk-" + "a" * 48, "sk-" + "0123456789" * 5,
    # cards
    "4111111111111112", "1234567812345678", "9783161484100", "1700000000000", "4111 1111 1111",
    "ORD-4111111111111111", "123e4567-e89b-12d3-a456-426614174000", "0000000000000000",
    luhn_complete("9", 16), luhn_complete("1", 16), "1,234,567,890,123.45", "41111111111111111111111",
    "3.4111111111111111", "4111 11 11 1111 1111",
    # IBAN
    "DE89370400440532013001", "GB82WEST1234569876543", "XX89370400440532013000", "DE12 is a code",
    "DE8937040044053201300012", "NL91ABNA04171643", "ISO8601",
    # e-mail
    "user@localhost", "@handle", "foo@bar", "name at example dot com", "x@1.2.3.4", "user@@example.com",
    "git@", "@example.com", "a@b", "mailto:", "v1.2@3",
    # phone
    "2024-01-15", "192.168.1.1", "v1.2.3", "123-456-7890", "555-0132", "Order 12345678", "ZIP 94103-1234",
    "ISBN 978-3-16-148410-0", "+5%", "1.5e+10", "+1234567", "2023-11-30T10:20:30Z", "3.14159265",
    "price +15.00", "10.555.1234", "415-555.0132", "+12 -- 34", "id 4155550132", "+0 12 34",
]


@pytest.mark.parametrize("name, text", POSITIVES, ids=[f"{n}:{t[:24]}" for n, t in POSITIVES])
def test_every_positive_is_found_by_its_detector(name: str, text: str) -> None:
    assert DETECTORS[name].found(text), f"{name} missed {text!r}"


@pytest.mark.parametrize("text", NEGATIVES)
def test_no_look_alike_is_flagged_by_any_detector(text: str) -> None:
    assert scan(text, expand(["all"])) is None


def test_the_corpus_covers_every_detector() -> None:
    assert {n for n, _ in POSITIVES} == set(DETECTORS)
    assert set(GROUPS["secrets"]) | set(GROUPS["pii"]) == set(DETECTORS)


def test_checksums() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert iban_ok("DE89370400440532013000") and not iban_ok("DE89370400440532013001")
    assert not iban_ok("DE8937040044053201300")  # one short of Germany's 22


@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_a_long_hostile_text_is_scanned_in_linear_time(name: str) -> None:
    # Shapes that make backtracking regexes quadratic or worse: long runs with no end.
    texts = ["a" * 100_000, "1" * 100_000, "@" + "a" * 99_999, "a@" * 50_000, "1 " * 50_000, "eyJ" * 33_000,
             "+1" * 50_000, "Bearer " * 14_000, "sk-" * 33_000, "DE89 " * 20_000, "-----BEGIN " * 9_000]
    t0 = time.process_time()
    for text in texts:
        DETECTORS[name].found(text)
    assert time.process_time() - t0 < 5.0


# -- the scanner's cheap test (Cue): a necessary condition of each detector ------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spanassert.assertions.detectors import Scanner  # noqa: E402

_PIECES = [t for _, t in POSITIVES] + NEGATIVES


@pytest.mark.parametrize("name, text", POSITIVES, ids=[f"{n}:{t[:24]}" for n, t in POSITIVES])
def test_every_positive_meets_its_detectors_cue_and_its_hint(name: str, text: str) -> None:
    import re

    assert Scanner([name]).may_find(text)
    assert re.search(DETECTORS[name].hint or "", text)


_text = st.lists(
    st.sampled_from(_PIECES).flatmap(lambda p: st.tuples(st.integers(0, len(p)), st.integers(0, len(p)))
                                     .map(lambda ij: p[min(ij):max(ij)]))
    | st.text(alphabet="0123456789 -+().@AKIaSEcrtBbe\u0663\u0966\u017f", max_size=30),
    max_size=6).map("".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_text)
def test_where_no_cue_holds_no_detector_finds_anything(text: str) -> None:
    """Texts built from pieces of the corpus (cut anywhere), digits of other scripts and the
    characters the shapes are made of: whatever a detector finds, its scanner's cheap test let
    through."""
    for name in DETECTORS:
        if DETECTORS[name].found(text):
            assert Scanner([name]).may_find(text), (name, text)
    every = Scanner(expand(["all"]))
    if not every.may_find(text):
        assert every.scan(text) is None and every.clears(text)
    for inner in (text[1:], text[:-1], text[2:-2]):
        if every.clears(text):
            assert every.clears(inner)  # a cleared text clears its pieces


def test_digit_counts_cover_digits_of_every_script() -> None:
    assert Scanner(["credit_card"]).may_find("\u0664\u0661\u0661\u0661" * 4)  # Arabic-Indic digits: \d matches
    assert not Scanner(["credit_card"]).may_find("order 12345 of 678")
