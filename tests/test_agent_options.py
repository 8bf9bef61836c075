"""An agent's settings: one frozen, validated :class:`AgentOptions`, also taken as
keywords (``Agent(url, interval=5)`` as before), no broker needed."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest

from qmf_async.agent import Agent, AgentOptions, Arg, event_class, load_schema_xml
from qmf_async.agent._options import AgentKeywords
from qmf_async.errors import UsageError

URL = "amqp://guest:guest@localhost:5672/"


def test_the_keywords_are_the_fields_of_the_options() -> None:
    assert set(AgentKeywords.__annotations__) == {f.name for f in attrs.fields(AgentOptions)}


def test_options_and_keywords_make_the_same_agent() -> None:
    sid = uuid.UUID(int=7)
    given = AgentOptions(label="batch", interval=5, agent_bank=9, attach=False, system_id=sid,
                         qmf_versions=[1], sasl_mechanisms="plain,external")
    by_options = Agent(URL, options=given)
    by_keywords = Agent(URL, label="batch", interval=5, agent_bank=9, attach=False,
                        system_id=sid, qmf_versions=[1], sasl_mechanisms="plain,external")
    assert by_options.options == by_keywords.options == given
    assert given.qmf_versions == frozenset({1})
    assert given.sasl_mechanisms == ("PLAIN", "EXTERNAL")
    for agent in (by_options, by_keywords):
        assert (agent.label, agent.interval, agent.agent_bank, agent.attach) == (
            "batch", 5, 9, False)
        assert agent.system_id == sid and agent.v2_name is None
    # keywords change the options they are given with
    both = Agent(URL, options=given, interval=2.5, qmf_versions=(1, 2))
    assert both.options == attrs.evolve(given, interval=2.5, qmf_versions={1, 2})
    assert both.v2_name == f"qmf-async:batch:{sid}"


def test_options_are_frozen_and_the_agent_shows_them() -> None:
    agent = Agent(URL, max_per_body=5)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        agent.options.interval = 1.0  # type: ignore[misc]
    assert agent.options == AgentOptions(max_per_body=5) and agent.max_per_body == 5
    agent.max_per_body = 7  # the two writable settings change the options too
    agent.reconnect = False
    assert agent.options == AgentOptions(max_per_body=7, reconnect=False)
    assert agent.protocol.max_per_body == 7 and not agent.reconnect


@pytest.mark.parametrize("settings", [
    {"interval": 0}, {"method_timeout": -1}, {"max_concurrency": 0}, {"max_outgoing": 0},
    {"attach_timeout": 0}, {"connect_timeout": 0}, {"max_get_per_body": 0},
    {"broker_bank": 1 << 20}, {"agent_bank": -1}, {"qmf_versions": ()},
    {"qmf_versions": (1, 3)}, {"v2_name": "no-colons"}, {"v2_aliases": ("",)},
    {"protocol": "2.0"}, {"sasl_mechanisms": "PLAIN+"},
], ids=lambda s: next(iter(s)))
def test_a_bad_setting_is_a_usage_error_before_anything_starts(settings: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        AgentOptions(**settings)
    with pytest.raises(UsageError):
        Agent(URL, **settings)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="intervall"):
        Agent(URL, intervall=5)  # type: ignore[call-arg]


def test_event_severities_of_an_xml_schema_are_the_defaults() -> None:
    schemas = load_schema_xml(
        '<schema package="org.example.xml">'
        '<eventArguments><arg name="n" type="uint32"/></eventArguments>'
        '<event name="warned" sev="warn" args="n"/></schema>')
    plain = event_class("org.example.xml", "plain", [Arg("n", "uint32")])
    (warned,) = schemas
    agent = Agent(URL, schemas=[*schemas, plain])  # a plain list: 6 (info) for all
    assert agent._event_severity == {warned.class_key: 6, plain.class_key: 6}
    agent = Agent(URL, schemas=schemas)
    assert agent._event_severity == {warned.class_key: 4}
