"""The DevTools message layer, without I/O: ids, responses matched to commands, events routed by
method and session, error responses as CommandError; any bytes give ProtocolError, never a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archiver.browser.devtools import (
    CommandError,
    Event,
    Protocol,
    ProtocolError,
    Response,
    parse_message,
)
from tests.support.fuzzing import examples


def test_commands_are_numbered_and_carry_their_session() -> None:
    protocol = Protocol()
    first, text = protocol.command("Target.createTarget", {"url": "about:blank"})
    second, other = protocol.command("Runtime.evaluate", {"expression": "1"}, session="S1")
    assert (first, second) == (1, 2)
    assert json.loads(text) == {"id": 1, "method": "Target.createTarget", "params": {"url": "about:blank"}}
    assert json.loads(other)["sessionId"] == "S1"


def test_responses_match_their_commands_in_any_order_and_only_once() -> None:
    protocol = Protocol()
    first, _ = protocol.command("A.one")
    second, _ = protocol.command("B.two")
    answer = protocol.receive(json.dumps({"id": second, "result": {"b": 2}}))
    assert answer == Response(second, {"b": 2}, None)
    assert protocol.receive(json.dumps({"id": first, "result": {}})) == Response(first, {}, None)
    assert protocol.receive(json.dumps({"id": first, "result": {}})) is None  # answered already


def test_a_forgotten_command_has_no_response() -> None:
    protocol = Protocol()
    number, _ = protocol.command("Page.navigate", {"url": "http://a.test/"})
    protocol.forget(number)
    assert protocol.receive(json.dumps({"id": number, "result": {}})) is None


def test_an_error_response_names_the_method_and_the_error() -> None:
    protocol = Protocol()
    number, _ = protocol.command("Fetch.fulfillRequest")
    response = protocol.receive(json.dumps(
        {"id": number, "error": {"code": -32602, "message": "Invalid parameters", "data": "requestId"}}))
    assert isinstance(response, Response) and isinstance(response.error, CommandError)
    assert response.error.method == "Fetch.fulfillRequest" and response.error.code == -32602
    assert str(response.error) == "Fetch.fulfillRequest: Invalid parameters (requestId) [-32602]"


def test_events_go_to_the_listeners_of_their_method_and_session() -> None:
    protocol = Protocol()
    protocol.listen("Fetch.requestPaused", "S1", "first")
    protocol.listen("Fetch.requestPaused", "S2", "second")
    protocol.listen("Target.targetCreated", None, "browser")
    message = {"method": "Fetch.requestPaused", "params": {"requestId": "r1"}, "sessionId": "S1"}
    assert protocol.receive(json.dumps(message)) == (
        Event("Fetch.requestPaused", {"requestId": "r1"}, "S1"), ["first"])
    assert protocol.receive(json.dumps({"method": "Target.targetCreated", "params": {}})) == (
        Event("Target.targetCreated", {}, None), ["browser"])
    protocol.unlisten("Fetch.requestPaused", "S1", "first")
    assert protocol.receive(json.dumps(message)) == (
        Event("Fetch.requestPaused", {"requestId": "r1"}, "S1"), [])
    assert sorted(map(str, protocol.listeners())) == ["browser", "second"]


@pytest.mark.parametrize(("data", "says"), [
    (b"\xff\xfe{", "not JSON"),
    ("[1, 2]", "not an object"),
    ('{"id": "7", "result": {}}', "id is not an integer"),
    ('{"id": true, "result": {}}', "id is not an integer"),
    ('{"id": 7}', "result is a JSON NoneType"),
    ('{"id": 7, "error": "bad"}', "error is a JSON str"),
    ('{"params": {}}', "neither an id nor a method"),
    ('{"method": "X.y", "params": []}', "X.y's params"),
    ('{"method": "X.y", "sessionId": 5}', "sessionId is not a string"),
    ("[" * 100_000, "not JSON"),
])
def test_malformed_messages_say_what_is_wrong(data: str | bytes, says: str) -> None:
    with pytest.raises(ProtocolError, match=says):
        parse_message(data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)
_shaped = st.fixed_dictionaries({}, optional={
    "id": st.integers() | _json, "method": st.text(max_size=20) | _json, "params": _json,
    "result": _json, "error": _json, "sessionId": st.text(max_size=10) | _json,
}).map(json.dumps)


@settings(max_examples=examples(300))
@given(st.binary(max_size=300) | st.text(max_size=300) | _shaped)
def test_any_message_parses_or_gets_a_protocol_error(data: str | bytes) -> None:
    protocol = Protocol()
    protocol.command("A.b")
    protocol.listen("A.c", None, "listener")
    try:
        routed = protocol.receive(data)
    except ProtocolError as error:
        assert str(error)
        return
    assert routed is None or isinstance(routed, Response) or isinstance(routed[0], Event)
