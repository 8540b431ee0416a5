"""Recorded JSON decodes to the same value and state whichever parser reads it (json.loads for the
first few thousand texts of a process, msgspec after), and canonical forms of equal values are equal."""
from __future__ import annotations

import json
from typing import Any, Iterator, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanassert.assertions.values import canonical_bytes, canonical_json
from spanassert.core import toolcall
from spanassert.core.toolcall import CONTENT_OK, decode_content

EDGES = [
    '{"a": 1}', '[1, 2 ]', ' {"a" : 1} ', '"x"', '"\\u00e9"', '"\\ud800"', '"\\udfff"', "NaN", "Infinity",
    "-Infinity", "1e400", "1e999999999", "-0", "-0.0", "0.1", "1E5", "1.00000000000000000001",
    "12345678901234567890123", "-12345678901234567890123", "18446744073709551616", '{"a":1,"a":2}',
    '"a\\nb"', '"a\nb"', '"\x7f"', "01", "+1", ".5", "1.", "[1,]", "{'a':1}", '{"a":1,}', "tru", "true ",
    "null", "false", '{"a": [1, {"b": null}]', '{"a": "b"', "[" * 500 + "]" * 500, "-", "0e", "1_000",
    '"\\x41"', '[1] x', "\ufeff[1]", '{"k": 1.5e300}', '{"k": 5e-324}',
]


@pytest.fixture
def parsers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Tuple[Any, Any]]:
    """decode_content with json.loads alone, and with msgspec first."""
    import msgspec.json

    def slow(raw: Any) -> Any:
        monkeypatch.setattr(toolcall, "_fast_loads", None)
        monkeypatch.setattr(toolcall, "_slow_decodes", -(1 << 40))
        return decode_content(raw)

    def fast(raw: Any) -> Any:
        monkeypatch.setattr(toolcall, "_fast_loads", msgspec.json.Decoder().decode)
        return decode_content(raw)

    yield slow, fast


def _same(a: Tuple[Any, str], b: Tuple[Any, str]) -> bool:
    if a[1] != b[1]:
        return False
    return json.dumps(a[0], sort_keys=True, default=repr) == json.dumps(b[0], sort_keys=True, default=repr) and \
        type(a[0]) is type(b[0])


@pytest.mark.parametrize("text", EDGES)
def test_an_edge_case_decodes_the_same_with_either_parser(parsers: Tuple[Any, Any], text: str) -> None:
    slow, fast = parsers
    assert _same(slow(text), fast(text))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=_json, spaced=st.booleans(), cut=st.integers(0, 4))
def test_generated_json_decodes_the_same_with_either_parser(parsers: Tuple[Any, Any], value: Any, spaced: bool,
                                                           cut: int) -> None:
    slow, fast = parsers
    text = json.dumps(value, indent=1 if spaced else None, ensure_ascii=not spaced)
    assert _same(slow(text), fast(text))
    if cut and len(text) > cut:
        assert _same(slow(text[:-cut]), fast(text[:-cut]))  # cut short: unparsable, or another value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=_json, b=_json)
def test_canonical_bytes_are_equal_exactly_when_the_canonical_json_is(a: Any, b: Any) -> None:
    assert (canonical_bytes(a) == canonical_bytes(b)) == (canonical_json(a) == canonical_json(b))
    shuffled = json.loads(json.dumps(a))  # a copy: another object, keys in the same order
    if isinstance(shuffled, dict):
        shuffled = dict(reversed(list(shuffled.items())))
    assert canonical_json(shuffled) == canonical_json(a)
    assert canonical_bytes(shuffled) == canonical_bytes(a)


def test_values_msgspec_cannot_write_take_the_json_form() -> None:
    assert canonical_bytes({"a": None}) == b'{"a":null}'
    assert canonical_bytes({"a": float("nan")}).startswith(b"\0")
    assert canonical_bytes({"a": float("nan")}) != canonical_bytes({"a": None})
    assert canonical_bytes(["\ud800"]).startswith(b"\0")


def test_the_fast_parser_comes_after_enough_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(toolcall, "_fast_loads", None)
    monkeypatch.setattr(toolcall, "_slow_decodes", 0)
    monkeypatch.delitem(sys.modules, "msgspec.json", raising=False)
    monkeypatch.setattr(toolcall, "_FAST_AFTER", 3)
    for _ in range(2):
        assert decode_content('{"a": 1}') == ({"a": 1}, CONTENT_OK)
    assert toolcall._fast_loads is None
    assert decode_content('{"a": 1}') == ({"a": 1}, CONTENT_OK)
    assert toolcall._fast_loads is not None


def _call_reads(raw: Any, params: Any) -> Tuple[Any, ...]:
    call = toolcall.ToolCall("t", arguments_raw=raw)
    call.params = params
    return (call.arguments_state, json.dumps(call.arguments, sort_keys=True, default=repr), type(call.arguments),
            call.arguments_bound, call.arguments_named, call.arguments_problem)


_OBJECT_EDGES = ['{"a": 1}', '{"a": 1}\n', '{"a": 1} \t\r\n', '{"a": 1}\u00a0', '{"a": 1}\u2028', '{"a": 1}x',
                 '{"a": 1', '{"a": NaN}', '{"a": "\\ud800"}', '{"a": 1e999}', '{"a":1,"a":2}', "{}", "{ }",
                 '{"a": [1, {"b": null}]}', "{'a': 1}", '{"a": 1}}', "{", '{"a": 12345678901234567890123}']


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=_json, tail=st.sampled_from(["", " ", "\n", "\u00a0", "}", "x"]),
       params=st.sampled_from([None, ("q",), ()]))
def test_a_calls_arguments_read_the_same_with_either_parser(monkeypatch: pytest.MonkeyPatch, value: Any, tail: str,
                                                            params: Any) -> None:
    """ToolCall reads an object text with msgspec directly (no strip, no tuple); what it then
    holds is what the general path (decode_content, json.loads alone) gives, bound or not."""
    import msgspec.json

    texts = [json.dumps(value) + tail, json.dumps({"k": value}) + tail, *_OBJECT_EDGES]
    for text in texts:
        monkeypatch.setattr(toolcall, "_fast_loads", None)
        monkeypatch.setattr(toolcall, "_slow_decodes", -(1 << 40))
        slow = _call_reads(text, params)
        monkeypatch.setattr(toolcall, "_fast_loads", msgspec.json.Decoder().decode)
        assert _call_reads(text, params) == slow, text


# -- keys repeated in an object (parsers disagree on which value holds) --------------------------
_KEYS = st.sampled_from(["a", "b", "a:b", ":", "é", "u003a"])
_LEAVES = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "x:y", "::", "\\u003a", "é", ""]), st.none())


def _text(value: Any, draw: Any) -> str:
    """``value`` written as JSON, objects as lists of pairs (so a key may repeat), with odd spacing
    around colons and colons sometimes escaped as \\u003a."""
    if isinstance(value, tuple):  # an object: ((key, value), ...)
        sep = draw(st.sampled_from([":", " : ", ":\n"]))
        return "{" + ",".join(_text(k, draw) + sep + _text(v, draw) for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v, draw) for v in value) + "]"
    if isinstance(value, str):
        text = json.dumps(value)
        return text.replace(":", "\\u003a") if draw(st.booleans()) else text
    return json.dumps(value)


_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.lists(st.tuples(_KEYS, inner), max_size=4).map(tuple)), max_leaves=12)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_repeated_keys_are_found_exactly_whatever_the_text_holds(data: Any) -> None:
    text = _text(data.draw(_VALUES), data.draw)
    value = json.loads(text)
    exact = toolcall._differing_repeat(text)  # every pair kept: the reference
    assert toolcall.repeats_keys(text, value) is exact, text


@pytest.mark.parametrize(("text", "repeats"), [
    ('{"amount": 5000, "amount": 5}', True), ('{"amount": 5, "amount": 5}', False),
    ('{"a": "x:y", "b": 1}', False), ('{"a": "x:y", "b": 1, "b": 2}', True),
    ('{"a": "x\\u003ay", "b": 1, "b": 2}', True), ('{"a": "x\\u003ay", "b": 1}', False),
    ('[{"a": 1}, {"a": 1, "a": [2]}]', True), ('{"p": {"a": 1}, "p": {"a": 1}}', False),
    ('{"a" : 1 , "a" : 2}', True), ('"a:b"', False), ('[1, 2]', False), ('{"a": true, "a": 1}', True),
    ('{"a": 1, "a": 1.0}', True),
])
def test_repeated_keys_with_different_values(text: str, repeats: bool) -> None:
    assert toolcall.repeats_keys(text, json.loads(text)) is repeats
