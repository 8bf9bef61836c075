"""``SessionOptions``: a Session's settings as one frozen value (no broker needed)."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import qmf_async
from qmf_async import Session, SessionOptions, UsageError
from qmf_async.console import SessionOptions as ConsoleSessionOptions
from qmf_async.console._options import SessionKeywords

#: Session's keywords and their defaults before the settings became SessionOptions
BEFORE = {
    "rcv_objects": True, "rcv_events": True, "rcv_heartbeats": True,
    "user_bindings": False, "manage_connections": False,
    "timeout": 10.0, "broker_timeout": 2.0, "schema_timeout": 5.0,
    "agent_interval": 10.0, "min_agent_interval": 0.1, "missed_heartbeats": 3,
    "topic_max_length": 100_000, "prefetch": 1000, "max_held": 10_000,
    "completion_timeout": 5.0, "max_objects": 1_000_000, "max_query_items": 1_000_000,
    "reconnect_min_delay": 0.5, "reconnect_max_delay": 30.0, "close_timeout": 5.0,
    "protocol": "auto", "qmf_version": None,
}
#: settings added since, with their defaults
ADDED = {"forget_deleted_after": 30.0}
FLAGS = ("rcv_objects", "rcv_events", "rcv_heartbeats", "user_bindings",
         "manage_connections")


def test_defaults_are_the_former_keyword_defaults() -> None:
    assert attrs.asdict(SessionOptions()) == {**BEFORE, **ADDED}
    assert Session().options == SessionOptions()
    assert {n: getattr(Session(), n) for n in BEFORE} == BEFORE


def test_exported_and_every_field_is_a_keyword() -> None:
    assert qmf_async.SessionOptions is ConsoleSessionOptions is SessionOptions
    assert "SessionOptions" in qmf_async.__all__
    assert "SessionOptions" in qmf_async.console.__all__
    assert set(SessionKeywords.__optional_keys__) | set(FLAGS) == set(BEFORE) | set(ADDED)
    assert not set(SessionKeywords.__optional_keys__) & set(FLAGS)
    params = list(inspect.signature(Session).parameters)
    assert params[:6] == ["console", *FLAGS]  # still positional, in the same order


def test_the_keywords_and_attributes_mirror_the_options() -> None:
    """The settings are declared in SessionOptions; the keyword TypedDict (PEP 692 needs
    a literal one) and the session's attributes are static-typing mirrors of it, which
    Python's type system cannot derive: their names and types must agree with it."""
    from typing import get_type_hints

    from qmf_async.console._options import Setting
    declared = get_type_hints(SessionOptions)
    assert list(declared) == [f.name for f in attrs.fields(SessionOptions)]
    keywords = get_type_hints(SessionKeywords)
    assert keywords == {n: t for n, t in declared.items() if n not in FLAGS}
    attributes = {n: t for n, t in get_type_hints(Session).items()
                  if getattr(t, "__origin__", None) is Setting}
    assert attributes == {n: Setting[t] for n, t in declared.items()}
    assert all(isinstance(vars(Session)[n], Setting) for n in declared)


@pytest.mark.parametrize(("name", "value", "message"), [
    ("timeout", 0, "timeout must be positive"),
    ("broker_timeout", -1.0, "broker_timeout must be positive"),
    ("schema_timeout", 0.0, "schema_timeout must be positive"),
    ("agent_interval", 0, "agent_interval must be positive"),
    ("completion_timeout", 0, "completion_timeout must be positive"),
    ("max_objects", 0, "max_objects must be positive"),
    ("max_query_items", 0, "max_query_items must be positive"),
    ("missed_heartbeats", 0, "missed_heartbeats must be positive"),
    ("topic_max_length", 0, "topic_max_length must be positive"),
    ("max_held", 0, "max_held must be positive"),
    ("close_timeout", 0, "close_timeout must be positive"),
    ("reconnect_min_delay", 0, "reconnect_min_delay must be positive"),
    ("min_agent_interval", -0.1, "min_agent_interval must be >= 0"),
    ("prefetch", -1, "prefetch must be an int >= 0, not -1"),
    ("prefetch", 1.5, "prefetch must be an int >= 0, not 1.5"),
    ("reconnect_max_delay", 0.2,
     r"reconnect_max_delay \(0.2\) must be at least reconnect_min_delay \(0.5\)"),
    ("protocol", "0-10", "protocol must be one of auto, 0-9-1, 1.0, not '0-10'"),
    ("qmf_version", 3, r"qmf_version must be 1, 2 or None \(automatic\), not 3"),
])
def test_a_bad_value_is_a_usage_error(name: str, value: Any, message: str) -> None:
    with pytest.raises(UsageError, match=f"^{message}$"):
        SessionOptions(**{name: value})
    with pytest.raises(UsageError, match=f"^{message}$"):
        Session(**{name: value})
    session = Session()
    with pytest.raises(UsageError, match=f"^{message}$"):
        setattr(session, name, value)
    assert session.options == SessionOptions()  # unchanged


def test_edge_values_are_accepted() -> None:
    options = SessionOptions(prefetch=0, min_agent_interval=0, reconnect_min_delay=0.1,
                             reconnect_max_delay=0.1, protocol="1.0", qmf_version=2)
    assert (options.prefetch, options.min_agent_interval) == (0, 0)
    # the order the delays are given in does not matter: both are checked together
    assert Session(reconnect_max_delay=0.2, reconnect_min_delay=0.1).reconnect_max_delay == 0.2


def test_keywords_and_options_give_the_same_value() -> None:
    kw: dict[str, Any] = {"timeout": 3.0, "agent_interval": 0.5, "protocol": "0-9-1",
                          "qmf_version": 1, "max_objects": 10}
    by_keywords = Session(None, False, True, False, True, True, **kw)
    options = SessionOptions(rcv_objects=False, rcv_heartbeats=False, user_bindings=True,
                             manage_connections=True, **kw)
    assert by_keywords.options == options
    assert Session(options=options).options == options
    assert Session(options=options).options is options  # nothing to apply: kept as is


def test_keywords_apply_on_top_of_options() -> None:
    options = SessionOptions(timeout=3.0, rcv_events=False, prefetch=5)
    session = Session(None, True, options=options, timeout=7.0, max_held=2)
    assert session.options == attrs.evolve(options, rcv_objects=True, timeout=7.0, max_held=2)
    assert (session.timeout, session.rcv_events, session.prefetch) == (7.0, False, 5)
    assert options.timeout == 3.0  # the given value is untouched
    # a flag left out keeps what the options say
    assert Session(options=SessionOptions(rcv_objects=False)).rcv_objects is False
    # the checks apply to the combination
    with pytest.raises(UsageError, match="reconnect_max_delay"):
        Session(options=SessionOptions(reconnect_min_delay=2.0), reconnect_max_delay=1.0)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="bogus"):
        Session(bogus=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        SessionOptions(bogus=1)  # type: ignore[call-arg]


def test_the_value_is_frozen() -> None:
    options = SessionOptions()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.timeout = 1.0  # type: ignore[misc]
    session = Session()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        session.options.timeout = 1.0  # type: ignore[misc]
    assert hash(options) == hash(SessionOptions())  # a value: usable as a key


def test_session_attributes_read_and_replace_the_options() -> None:
    session = Session(timeout=4.0, max_query_items=9)
    assert (session.timeout, session.max_query_items) == (4.0, 9)
    before = session.options
    session.timeout = 30.0  # as before the options: the setting can still be changed
    assert session.timeout == session.options.timeout == 30.0
    assert session.options == attrs.evolve(before, timeout=30.0)
    assert before.timeout == 4.0
    session.options = SessionOptions(agent_interval=1.0)
    assert (session.timeout, session.agent_interval) == (10.0, 1.0)
    assert Session.timeout is Session.__dict__["timeout"]


def test_the_protocol_picks_the_transport_factory() -> None:
    session = Session(protocol="1.0")
    host = session._broker_host()
    assert repr(host.transport_factory) == "transport_factory('1.0')"
    session.protocol = "0-9-1"  # applies to brokers added later
    assert repr(session._broker_host().transport_factory) == "transport_factory('0-9-1')"


async def test_connect_takes_options() -> None:
    """``Session.connect`` hands ``options=`` to the Session like the other keywords
    (checked without a broker: the settings fail before any connection)."""
    with pytest.raises(UsageError, match="max_objects must be positive"):
        async with Session.connect("amqp://localhost:1/", options=SessionOptions(),
                                   max_objects=0):
            pass
