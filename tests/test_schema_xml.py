"""The QMF XML schema loader: every construct, expansions, errors with context, hashes,
and the qpidd schema file checked against the real qpidd captures."""

from __future__ import annotations

import base64
import io
import json
import pathlib
from typing import Any
from xml.sax.saxutils import quoteattr

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmf_async import Access, ClassKind, QmfType, SchemaClass, UsageError, wire
from qmf_async.agent import (
    Arg,
    Property,
    Statistic,
    XmlSchemas,
    compute_hash,
    load_schema_xml,
    load_schema_xml_with_severity,
    method,
    object_class,
)

from ._captures import CAPTURES

ROOT = pathlib.Path(__file__).resolve().parent.parent
QPIDD_XML = ROOT / "examples" / "schemas" / "qpidd-broker.xml"
CAPTURE = CAPTURES / "qpidd-1.40-qmf1.jsonl"

QPIDD_CLASSES = ("broker", "vhost", "queue", "exchange", "binding", "queueDeclare",
                 "queueDelete", "exchangeDeclare", "exchangeDelete", "bind", "unbind")

FULL = """<?xml version="1.0"?>
<!-- a comment -->
<schema package="org.example.app">
  <group name="traffic">
    <statistic name="msgIn" type="count64" unit="message" desc="Messages in"/>
    <statistic name="depth" type="hilo32" unit="message" desc="Depth"/>
  </group>
  <class name="Widget">
    <property name="parentRef" type="objId" references="Factory" access="RC" index="y"
              parentRef="y"/>
    <property name="name" type="sstr" access="RC" index="y" desc="Widget name"/>
    <property name="size" type="uint32" access="RW" unit="mm" min="1" max="0x100"
              desc="Size"/>
    <property name="label" type="lstr" optional="y" maxLen="200"/>
    <property name="tag" type="sstr" maxlen="16"/>
    <statistic name="uptime" type="deltaTime"/>
    <group name="traffic"/>
    <statistic name="latency" type="mmaTime" unit="nanosecond" desc="Latency"/>
    <statistic name="flags" type="hilo8"/>
    <method name="resize" desc="Change the size">
      <arg name="size" type="uint32" dir="I" min="1" max="1000" desc="New size"/>
      <arg name="old" type="uint32" dir="O"/>
      <arg name="note" type="lstr" dir="io" maxLen="64" default="none" unit="text"/>
      <arg name="implicit" type="bool"/>
    </method>
    <method name="reset"/>
  </class>
  <eventArguments>
    <arg name="who" type="sstr" desc="Who did it"/>
    <arg name="count" type="count32" unit="widget" desc="How many"/>
  </eventArguments>
  <event name="widgetMade" sev="notice" args="who, count"/>
  <event name="widgetLost" sev="crit">
    <arg name="why" type="lstr" desc="Reason"/>
  </event>
  <event name="plain"/>
</schema>
"""


def load(text: str, **options: Any) -> XmlSchemas:
    return load_schema_xml(text, **options)


def schema_doc(body: str, package: str = "p") -> str:
    return f'<schema package="{package}">\n{body}\n</schema>\n'


def error_of(text: str, **options: Any) -> str:
    with pytest.raises(UsageError) as info:
        load_schema_xml(text, **options)
    return str(info.value)


# --------------------------------------------------------------------------- constructs


def test_every_construct_of_a_full_file() -> None:
    schemas = load(FULL)
    assert schemas.package == "org.example.app"
    assert [s.class_key.name for s in schemas] == ["Widget", "widgetMade", "widgetLost", "plain"]
    widget = schemas.by_name("Widget")
    assert widget.kind == ClassKind.OBJECT
    assert widget.class_key.package == "org.example.app"

    assert widget.properties == (
        Property("parentRef", QmfType.REF, Access.RC, index=True),
        Property("name", QmfType.SSTR, Access.RC, index=True, desc="Widget name"),
        Property("size", QmfType.UINT32, Access.RW, unit="mm", min=1, max=256, desc="Size"),
        Property("label", QmfType.LSTR, Access.RO, optional=True, maxlen=200),
        Property("tag", QmfType.SSTR, Access.RO, maxlen=16),
    )
    assert widget.statistics == (
        Statistic("uptime", QmfType.DELTATIME),
        Statistic("msgIn", QmfType.UINT64, "message", "Messages in"),
        Statistic("depth", QmfType.UINT32, "message", "Depth"),
        Statistic("depthHigh", QmfType.UINT32, "message", "Depth (High)"),
        Statistic("depthLow", QmfType.UINT32, "message", "Depth (Low)"),
        Statistic("latencySamples", QmfType.DELTATIME, "nanosecond", "Latency (Samples)"),
        Statistic("latencyMin", QmfType.DELTATIME, "nanosecond", "Latency (Min)"),
        Statistic("latencyMax", QmfType.DELTATIME, "nanosecond", "Latency (Max)"),
        Statistic("latencyAverage", QmfType.DELTATIME, "nanosecond", "Latency (Average)"),
        Statistic("flags", QmfType.UINT8),
        Statistic("flagsHigh", QmfType.UINT8),
        Statistic("flagsLow", QmfType.UINT8),
    )
    resize, reset = widget.methods
    assert resize == method(
        "resize",
        Arg("size", QmfType.UINT32, "I", min=1, max=1000, desc="New size"),
        Arg("old", QmfType.UINT32, "O"),
        Arg("note", QmfType.LSTR, "IO", unit="text", maxlen=64, default="none"),
        Arg("implicit", QmfType.BOOL, "I"),  # dir defaults to I, as in qmf-gen
        desc="Change the size")
    assert reset == method("reset")

    made = schemas.by_name("widgetMade")
    assert made.kind == ClassKind.EVENT
    assert made.arguments == (Arg("who", QmfType.SSTR, desc="Who did it"),
                              Arg("count", QmfType.UINT32, unit="widget", desc="How many"))
    assert schemas.by_name("widgetLost").arguments == (Arg("why", QmfType.LSTR, desc="Reason"),)
    assert schemas.by_name("plain").arguments == ()
    assert schemas.severity("widgetMade") == 5
    assert schemas.severity("widgetLost") == 2
    assert schemas.severity("plain") == 6  # inform by default
    assert schemas.severity("Widget") == 6
    assert schemas.references == {("Widget", "parentRef"): "Factory"}


@pytest.mark.parametrize(("xml_type", "qmf_type"), [
    ("objId", QmfType.REF), ("uint8", QmfType.UINT8), ("uint16", QmfType.UINT16),
    ("uint32", QmfType.UINT32), ("uint64", QmfType.UINT64), ("int8", QmfType.INT8),
    ("int16", QmfType.INT16), ("int32", QmfType.INT32), ("int64", QmfType.INT64),
    ("bool", QmfType.BOOL), ("sstr", QmfType.SSTR), ("lstr", QmfType.LSTR),
    ("absTime", QmfType.ABSTIME), ("deltaTime", QmfType.DELTATIME), ("float", QmfType.FLOAT),
    ("double", QmfType.DOUBLE), ("uuid", QmfType.UUID), ("map", QmfType.MAP),
    ("list", QmfType.LIST), ("ABSTIME", QmfType.ABSTIME), ("objid", QmfType.REF),
])
def test_direct_types_everywhere(xml_type: str, qmf_type: QmfType) -> None:
    schemas = load(schema_doc(f"""
      <class name="c">
        <property name="p" type="{xml_type}"/>
        <statistic name="s" type="{xml_type}"/>
        <method name="m"><arg name="a" type="{xml_type}" dir="I"/></method>
      </class>
      <event name="e"><arg name="a" type="{xml_type}"/></event>"""))
    cls, event = schemas
    assert cls.properties[0].type == qmf_type
    assert cls.statistics[0].type == qmf_type
    assert cls.methods[0].arguments[0].type == qmf_type
    assert event.arguments[0].type == qmf_type


@pytest.mark.parametrize(("width", "qmf_type"), [
    ("8", QmfType.UINT8), ("16", QmfType.UINT16), ("32", QmfType.UINT32), ("64", QmfType.UINT64),
])
def test_statistic_expansions(width: str, qmf_type: QmfType) -> None:
    (cls,) = load(schema_doc(f"""
      <class name="c">
        <statistic name="n" type="count{width}" unit="u" desc="Count"/>
        <statistic name="w" type="hilo{width}" unit="u"/>
      </class>"""))
    assert cls.statistics == (
        Statistic("n", qmf_type, "u", "Count"),
        Statistic("w", qmf_type, "u"),           # no desc: High/Low have none either
        Statistic("wHigh", qmf_type, "u"),
        Statistic("wLow", qmf_type, "u"),
    )


@pytest.mark.parametrize(("xml_type", "qmf_type"), [
    ("mma32", QmfType.UINT32), ("mma64", QmfType.UINT64), ("mmaTime", QmfType.DELTATIME),
])
def test_mma_expansion(xml_type: str, qmf_type: QmfType) -> None:
    (cls,) = load(schema_doc(f"""
      <class name="c"><statistic name="lat" type="{xml_type}" desc="D"/></class>"""))
    assert [(s.name, s.type, s.desc) for s in cls.statistics] == [
        ("latSamples", qmf_type, "D (Samples)"), ("latMin", qmf_type, "D (Min)"),
        ("latMax", qmf_type, "D (Max)"), ("latAverage", qmf_type, "D (Average)")]


def test_hilo_and_mma_match_what_qpidd_sends() -> None:
    # qpidd's queue: consumerCount is hilo32, messageLatency is mmaTime (see the captures)
    (cls,) = load(schema_doc("""
      <class name="queue">
        <statistic name="consumerCount" type="hilo32" unit="consumer"
                   desc="Current consumers on queue"/>
        <statistic name="messageLatency" type="mmaTime" unit="nanosecond" desc="Deprecated"/>
      </class>"""))
    captured = captured_schemas()["queue"]
    wanted = [s for s in captured.statistics
              if s.name.startswith(("consumerCount", "messageLatency"))]
    assert list(cls.statistics) == wanted


def test_references_stay_off_the_wire_by_default() -> None:
    doc = schema_doc("""
      <class name="Queue">
        <property name="vhostRef" type="objId" references="Vhost" access="RC" index="y"/>
        <property name="altExchange" type="objId" references="other.pkg:Exchange"
                  optional="y"/>
        <method name="m"><arg name="target" type="objId" references="Queue"/></method>
      </class>""")
    (cls,) = load(doc)
    assert all(p.ref_class is None and p.ref_package is None for p in cls.properties)
    assert "refClass" not in cls.properties[0].to_map()
    assert "refPackage" not in cls.methods[0].arguments[0].to_map()
    assert load(doc).references == {("Queue", "vhostRef"): "Vhost",
                                     ("Queue", "altExchange"): "other.pkg:Exchange",
                                     ("Queue", "m", "target"): "Queue"}
    (wired,) = load(doc, wire_references=True, lowercase_class_names=True)
    assert (wired.properties[0].ref_package, wired.properties[0].ref_class) == ("p", "vhost")
    assert (wired.properties[1].ref_package, wired.properties[1].ref_class) == (
        "other.pkg", "exchange")
    assert wired.methods[0].arguments[0].ref_class == "queue"
    assert wired.properties[0].to_map()["refClass"] == b"vhost"
    assert wired.class_key.hash != cls.class_key.hash


def test_lowercase_class_names_like_qmf_gen() -> None:
    doc = schema_doc('<class name="ManagementSetupState"/><event name="queueDeclare"/>')
    assert [s.class_key.name for s in load(doc)] == ["ManagementSetupState", "queueDeclare"]
    assert [s.class_key.name for s in load(doc, lowercase_class_names=True)] == [
        "managementsetupstate", "queueDeclare"]


@pytest.mark.parametrize(("sev", "level"), [
    ("emerg", 0), ("alert", 1), ("crit", 2), ("error", 3), ("warn", 4), ("notice", 5),
    ("inform", 6), ("info", 6), ("debug", 7), ("WARN", 4), ("3", 3),
])
def test_event_severities(sev: str, level: int) -> None:
    schemas = load(schema_doc(f'<event name="e" sev="{sev}"/>'))
    assert schemas.severities == {schemas[0].class_key: level}
    doc = schema_doc(f'<event name="e" sev="{sev}"/>')
    classes, severities = load_schema_xml_with_severity(doc)
    assert isinstance(classes, list) and classes == list(schemas)
    assert severities == {classes[0].class_key: level}


def test_add_to_passes_event_severities_to_the_agent() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    class RecordingAgent:
        def add_schema(self, schema: SchemaClass, **kwargs: Any) -> None:
            calls.append((schema.class_key.name, kwargs))

    load(FULL).add_to(RecordingAgent())  # type: ignore[arg-type]
    assert calls == [("Widget", {}), ("widgetMade", {"severity": 5}),
                     ("widgetLost", {"severity": 2}), ("plain", {"severity": 6})]


def test_unknown_tags_and_attributes_are_skipped() -> None:
    doc = schema_doc("""
      <vendor-extension><class name="hidden"/></vendor-extension>
      <class name="c" color="blue">
        <property name="p" type="uint8" colour="red"><nested/></property>
        <statistic name="s" type="uint8" assign="p * 2"/>
        <comment>text</comment>
        <method name="m" owner="x"><note/><arg name="a" type="bool" whatever="1"/></method>
      </class>
      <event name="e" extra="1"><doc/></event>""")
    schemas = load(doc)
    assert [s.class_key.name for s in schemas] == ["c", "e"]
    plain = load(schema_doc("""
      <class name="c"><property name="p" type="uint8"/><statistic name="s" type="uint8"/>
        <method name="m"><arg name="a" type="bool"/></method></class>
      <event name="e"/>"""))
    assert list(schemas) == list(plain)  # same classes, same hashes
    assert error_of(doc, strict=True) == (
        "<string>:3: <vendor-extension> is not allowed in <schema>")
    no_vendor = doc.replace('<vendor-extension><class name="hidden"/></vendor-extension>', "")
    assert error_of(no_vendor, strict=True) == "<string>:4: <class> has unknown attribute 'color'"


def test_the_qpidd_file_is_strictly_valid() -> None:
    assert len(load_schema_xml(QPIDD_XML, strict=True)) == len(QPIDD_CLASSES)


# --------------------------------------------------------------------------- sources


def test_sources_path_text_bytes_and_files(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "s.xml"
    path.write_text(FULL, encoding="utf-8")
    expected = list(load(FULL))
    assert list(load_schema_xml(path)) == expected
    assert list(load_schema_xml(str(path))) == expected
    assert list(load_schema_xml(FULL.encode())) == expected
    assert list(load_schema_xml(bytearray(FULL.encode()))) == expected
    assert list(load_schema_xml(io.BytesIO(FULL.encode()))) == expected
    assert list(load_schema_xml(io.StringIO(FULL))) == expected
    with open(path, "rb") as f:
        assert list(load_schema_xml(f)) == expected
    assert load_schema_xml(path).source == str(path)
    assert load(FULL).source == "<string>"


def test_latin1_bytes_with_an_encoding_declaration() -> None:
    doc = '<?xml version="1.0" encoding="iso-8859-1"?>\n' + schema_doc(
        '<class name="c"><property name="p" type="sstr" desc="caf\xe9"/></class>')
    (cls,) = load_schema_xml(doc.encode("latin-1"))
    assert cls.properties[0].desc == "caf\xe9"


def test_unreadable_file(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.xml"
    with pytest.raises(UsageError, match=r"nope\.xml: cannot read schema file") as info:
        load_schema_xml(missing)
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(UsageError, match="cannot read an XML schema from int"):
        load_schema_xml(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("body", "line", "fragment"), [
    ('<class name="c">\n<property name="p" type="uint7"/></class>', 3, "unknown type 'uint7'"),
    ('<class name="c">\n\n<property name="p" type="hilo32"/></class>', 4,
     "type 'hilo32' is only allowed in <statistic>"),
    ('<class name="c"><property name="p" type="count8"/></class>', 2,
     "type 'count8' is only allowed in <statistic>"),
    ('<class name="c">\n<statistic name="s" type="int128"/></class>', 3, "unknown type 'int128'"),
    ('<class name="c"><method name="m">\n<arg name="a" type="mma32"/></method></class>', 3,
     "only allowed in <statistic>"),
    ('<event name="e"><arg name="a" type="hilo8"/></event>', 2, "only allowed in <statistic>"),
    ('<class name="c"><property name="p" type="bool" access="RX"/></class>', 2,
     "bad access code 'RX'"),
    ('<class name="c"><property name="p"/></class>', 2, "'p' has no type"),
    ('<class name="c"><property type="bool"/></class>', 2, "<property> has no name"),
    ("<class/>", 2, "<class> has no name"),
    ('<class name="  "/>', 2, "<class> has no name"),
    ('<class name="c"><statistic type="bool"/></class>', 2, "<statistic> has no name"),
    ('<class name="c"><method/></class>', 2, "<method> has no name"),
    ('<class name="c"><method name="m"><arg type="bool"/></method></class>', 2,
     "<arg> has no name"),
    ("<event/>", 2, "<event> has no name"),
    ('<class name="c"><method name="m"><arg name="a" type="bool" dir="X"/></method></class>',
     2, "bad dir 'X'"),
    ('<class name="c"><property name="p" type="bool" index="maybe"/></class>', 2,
     "index='maybe' is not 'y' or 'n'"),
    ('<class name="c"><property name="p" type="uint8" min="low"/></class>', 2,
     "min='low' is not an integer"),
    ('<class name="c"><property name="p" type="uint32" max="4294967295"/></class>', 2,
     "does not fit a signed 32-bit integer"),
    ('<event name="e" sev="loud"/>', 2, "unknown severity 'loud'"),
    ('<event name="e" sev="9"/>', 2, "unknown severity '9'"),
    ('<event name="e" args="a"/>', 2, "uses argument 'a', which no <eventArguments> declares"),
    ('<eventArguments><arg name="a" type="bool"/></eventArguments>\n'
     '<event name="e" args="a,a"/>', 3, "lists argument 'a' twice"),
    ('<eventArguments><arg name="a" type="bool"/>\n<arg name="a" type="bool"/></eventArguments>',
     3, "event argument 'a' is declared twice (first at line 2)"),
    ('<eventArguments><arg name="a" type="bool"/></eventArguments>\n'
     '<event name="e" args="a">\n<arg name="a" type="bool"/></event>', 4,
     "declares argument 'a' twice"),
    ('<class name="c"><property name="x" type="bool"/>\n<statistic name="x" type="bool"/>'
     "</class>", 3, "'x' is declared twice in class 'c' (first at line 2)"),
    ('<class name="c"><property name="xHigh" type="bool"/>\n'
     '<statistic name="x" type="hilo8"/></class>', 3, "'xHigh' is declared twice"),
    ('<class name="c"><method name="m"/>\n<method name="m"/></class>', 3,
     "'m' is declared twice in class 'c'"),
    ('<class name="c"><method name="m"><arg name="a" type="bool"/>\n'
     '<arg name="a" type="bool"/></method></class>', 3, "argument 'a' of c.m is declared twice"),
    ('<class name="c"/>\n<class name="c"/>', 3, "'c' is declared twice (first at line 2)"),
    ('<event name="e"/>\n<event name="e"/>', 3, "'e' is declared twice"),
    ('<class name="c"><group name="g"/></class>', 2, "refers to undefined group 'g'"),
    ('<group name="g"><group name="g"/></group>\n<class name="c"><group name="g"/></class>', 2,
     "group 'g' includes itself"),
    ('<group name="g"/>\n<group name="g"/>', 3, "group 'g' is defined twice"),
    ('<class name="%s"/>' % ("x" * 256), 2, "longer than 255 bytes"),
])
def test_errors_name_file_and_line(body: str, line: int, fragment: str) -> None:
    message = error_of(schema_doc(body))
    assert message.startswith(f"<string>:{line}: "), message
    assert fragment in message, message


def test_error_context_names_the_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "bad.xml"
    path.write_text(schema_doc('<class name="c">\n  <property name="p" type="nope"/>\n</class>'))
    with pytest.raises(UsageError, match=rf"^{path}:3: <property> unknown type 'nope'$"):
        load_schema_xml(path)


@pytest.mark.parametrize(("doc", "where"), [
    ('<schema package="p">\n<class name="c">\n</schema>', "3:"),
    ('<schema package="p">\n<class name="c" name="d"/></schema>', "2:"),
    ("", "1:"),
    ("<schema package='p'/>trailing<x/>", "1:"),
])
def test_malformed_xml(doc: str, where: str) -> None:
    with pytest.raises(UsageError, match=rf"^<(string|bytes)>:{where}\d+: malformed XML: ") as info:
        load_schema_xml(doc.encode())
    assert info.value.__cause__ is not None


def test_document_element_and_package() -> None:
    assert error_of("<classes/>") == (
        "<string>:1: <classes> is not a QMF schema (the document element must be <schema>)")
    assert error_of("<schema/>") == "<string>:1: <schema> has no package"
    assert "longer than 255 bytes" in error_of(f'<schema package="{"p" * 256}"/>')


def test_entity_declarations_are_refused() -> None:
    doc = ('<?xml version="1.0"?>\n<!DOCTYPE schema [\n<!ENTITY a "aaaaaaaaaa">\n'
           '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n]>\n<schema package="&b;"/>')
    message = error_of(doc)
    assert message.startswith("<string>:3: entity declarations"), message


# --------------------------------------------------------------------------- hashes


def test_hashes_are_deterministic_and_match_python_declarations() -> None:
    first, second = load(FULL), load(FULL)
    assert [s.class_key for s in first] == [s.class_key for s in second]
    for schema in first:
        assert schema.class_key.hash == compute_hash(schema)
    (cls,) = load(schema_doc('<class name="c"><property name="n" type="sstr" index="y"/>'
                             '<statistic name="k" type="count32"/>'
                             '<method name="m"><arg name="a" type="uint8"/></method></class>'))
    declared = object_class("p", "c", properties=[Property("n", "sstr", index=True)],
                            statistics=[Statistic("k", "uint32")],
                            methods=[method("m", Arg("a", "uint8", "I"))])
    assert cls == declared and cls.class_key == declared.class_key


def test_any_change_changes_the_hash() -> None:
    base = load(FULL).by_name("Widget").class_key.hash
    for old, new in [('desc="Size"', 'desc="Size!"'), ('unit="mm"', 'unit="cm"'),
                     ('access="RW"', 'access="RO"'), ('min="1" max="0x100"', 'min="1"')]:
        assert old in FULL
        assert load(FULL.replace(old, new)).by_name("Widget").class_key.hash != base


_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789",
                 min_size=1, max_size=12)
_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40) | st.none()
_types = st.sampled_from(["uint8", "int64", "sstr", "lstr", "bool", "map", "uuid", "double",
                          "absTime", "objId"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_names, _types, st.sampled_from(["RO", "RW", "RC"]), st.booleans(),
                          st.booleans(), _text, _text),
                min_size=1, max_size=6, unique_by=lambda t: t[0]))
def test_properties_round_trip_through_xml(props: list[tuple[Any, ...]]) -> None:
    lines = []
    for name, xml_type, access, index, optional, unit, desc in props:
        attrs = [("name", name), ("type", xml_type), ("access", access),
                 ("index", "y" if index else None), ("optional", "y" if optional else "n"),
                 ("unit", unit), ("desc", desc)]
        lines.append("<property" + "".join(f" {k}={quoteattr(v)}" for k, v in attrs
                                           if v is not None) + "/>")
    (cls,) = load(schema_doc('<class name="c">' + "\n".join(lines) + "</class>"))
    assert [(p.name, p.access.name, p.index, p.optional, p.unit, p.desc)
            for p in cls.properties] == [(n, a, i, o, u, d) for n, _, a, i, o, u, d in props]
    assert cls.class_key.hash == compute_hash(cls)


# --------------------------------------------------------------------------- qpidd


_CAPTURED: dict[str, tuple[SchemaClass, bytes, int]] = {}


def captured_schemas() -> dict[str, SchemaClass]:
    """Schemas qpidd sent in the capture (decoded in order with one registry)."""
    if not _CAPTURED:
        registry = wire.SchemaRegistry()
        for line in CAPTURE.read_text().splitlines():
            body = base64.b64decode(json.loads(line)["body_b64"])
            messages = wire.decode(body, registry)
            registry.learn(messages)
            for msg in messages:
                if isinstance(msg, wire.SchemaResponse):
                    _CAPTURED[msg.schema.class_key.name] = (msg.schema, body, len(messages))
    return {name: entry[0] for name, entry in _CAPTURED.items()}


def test_qpidd_file_has_the_listed_classes() -> None:
    schemas = load_schema_xml(QPIDD_XML)
    assert schemas.package == "org.apache.qpid.broker"
    assert [s.class_key.name for s in schemas] == list(QPIDD_CLASSES)
    assert all(schemas.severity(s) == 6 for s in schemas if s.is_event)


@pytest.mark.parametrize("name", QPIDD_CLASSES)
def test_qpidd_file_equals_the_captured_schema(name: str) -> None:
    loaded = load_schema_xml(QPIDD_XML).by_name(name)
    captured = captured_schemas()[name]
    assert loaded.kind == captured.kind
    assert loaded.class_key.package == captured.class_key.package
    assert loaded.properties == captured.properties
    assert loaded.statistics == captured.statistics
    assert loaded.methods == captured.methods
    assert loaded.arguments == captured.arguments
    # so the schema response differs from qpidd's in the 16 hash bytes only
    _, body, count = _CAPTURED[name]
    assert count == 1 and body[3:4] == b"s"
    seq = int.from_bytes(body[4:8], "big")
    ours = wire.encode(wire.SchemaResponse(seq, loaded))
    assert len(ours) == len(body)
    key_at = 8 + 1 + 1 + len(captured.class_key.package) + 1 + len(name)
    assert body[key_at:key_at + 16] == captured.class_key.hash
    assert ours[key_at:key_at + 16] == loaded.class_key.hash
    assert ours[:key_at] == body[:key_at]
    assert ours[key_at + 16:] == body[key_at + 16:]


@pytest.mark.parametrize(("text", "value"), [
    ("10", 10), ("010", 10), (" -5 ", -5), ("0x10", 16), ("0XfF", 255), ("-0x10", -16),
    ("2147483647", 2**31 - 1), ("-2147483648", -(2**31)),
])
def test_integer_attributes(text: str, value: int) -> None:
    (cls,) = load(schema_doc(f'<class name="c"><property name="p" type="int64" min="{text}"/>'
                             "</class>"))
    assert cls.properties[0].min == value
