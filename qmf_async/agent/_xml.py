"""Schemas from the QMF XML schema format (qpid's ``management-schema.xml``).

The format is the one of the Qpid book's QMF chapter and of qpid's code generator
(qmf-gen)::

    <schema package="org.example.app">
      <group name="counters"> <statistic .../> ... </group>      (optional fragments)
      <class name="widget">
        <property  name type access index optional unit min max maxLen desc references parentRef/>
        <statistic name type unit desc/>
        <method name desc> <arg name type dir unit min max maxLen desc default/> </method>
        <group name="counters"/>                                  (inserts a fragment)
      </class>
      <eventArguments> <arg name type unit desc/> ... </eventArguments>
      <event name="widgetMade" sev="inform" args="a, b"/>
      <event name="widgetLost" sev="warn"> <arg name type unit desc/> </event>
    </schema>

The wire maps are the ones qmf-gen makes qpidd send, so a class loaded here encodes
byte for byte like qpidd's (apart from the class hash):

* statistic types ``hiloN`` expand to ``X``, ``XHigh``, ``XLow`` (descriptions
  ``"D (High)"``, ``"D (Low)"``), ``countN`` to a plain ``uintN``, and ``mma32``,
  ``mma64``, ``mmaTime`` to ``XSamples``, ``XMin``, ``XMax``, ``XAverage`` (descriptions
  ``"D (Samples)"`` ...);
* a method argument without ``dir`` is ``I``; event arguments carry only name, type,
  unit and description; properties default to ``access="RO"``;
* ``references`` is not sent (qpidd does not put ``refPackage``/``refClass`` in its
  schema maps); it is kept in :attr:`XmlSchemas.references`, and on the wire only
  with ``wire_references=True``.

Class hashes are computed with :func:`~qmf_async.agent.compute_hash` (deterministic: the
same declaration always gets the same key).  Unknown tags and attributes are skipped
silently (``strict=True`` rejects them).
"""

from __future__ import annotations

import os
import xml.parsers.expat as expat
from collections.abc import Iterable, Mapping
from typing import IO, Any, Protocol, Union

from ..errors import UsageError
from ..wire import (
    Access,
    ClassKey,
    QmfType,
    SchemaArgument,
    SchemaClass,
    SchemaMethod,
    SchemaProperty,
    SchemaStatistic,
)
from ._declare import event_class, object_class


class _SchemaSink(Protocol):
    """What :meth:`XmlSchemas.add_to` serves the classes with (an Agent)."""

    def add_schema(self, schema: SchemaClass, *, severity: int = ...) -> None: ...

__all__ = ["SEVERITY_LEVELS", "XmlSchemas", "load_schema_xml", "load_schema_xml_with_severity"]

#: What :func:`load_schema_xml` reads: a path, XML text (a ``str`` starting with
#: ``<``), XML bytes, or a binary/text file object.
XmlSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes], IO[str]]

# types usable everywhere (the book's "Direct" accessor style)
_DIRECT: dict[str, QmfType] = {
    "objid": QmfType.REF,
    "uint8": QmfType.UINT8, "uint16": QmfType.UINT16, "uint32": QmfType.UINT32,
    "uint64": QmfType.UINT64,
    "int8": QmfType.INT8, "int16": QmfType.INT16, "int32": QmfType.INT32,
    "int64": QmfType.INT64,
    "bool": QmfType.BOOL, "sstr": QmfType.SSTR, "lstr": QmfType.LSTR,
    "abstime": QmfType.ABSTIME, "deltatime": QmfType.DELTATIME,
    "float": QmfType.FLOAT, "double": QmfType.DOUBLE, "uuid": QmfType.UUID,
    "map": QmfType.MAP, "list": QmfType.LIST,
}
_WIDTHS = {"8": QmfType.UINT8, "16": QmfType.UINT16, "32": QmfType.UINT32, "64": QmfType.UINT64}
# counters: plain unsigned integers (statistics and arguments)
_COUNT = {f"count{w}": t for w, t in _WIDTHS.items()}
# watermarked (statistics only): X, XHigh, XLow
_HILO = {f"hilo{w}": t for w, t in _WIDTHS.items()}
# min/max/average (statistics only): XSamples, XMin, XMax, XAverage
_MMA = {"mma32": QmfType.UINT32, "mma64": QmfType.UINT64, "mmatime": QmfType.DELTATIME}

#: Event severity names of the XML format (and their syslog levels).
SEVERITY_LEVELS: Mapping[str, int] = {
    "emerg": 0, "alert": 1, "crit": 2, "error": 3, "warn": 4, "notice": 5, "inform": 6,
    "info": 6, "debug": 7,
}
_DEFAULT_SEVERITY = 6

_TRUE = {"y", "yes", "true", "1"}
_FALSE = {"n", "no", "false", "0"}
_INT32 = (-(1 << 31), (1 << 31) - 1)

_KNOWN_ATTRS: dict[str, frozenset[str]] = {
    "schema": frozenset({"package"}),
    "class": frozenset({"name"}),
    "group": frozenset({"name"}),
    "property": frozenset({"name", "type", "access", "index", "optional", "unit", "min", "max",
                           "maxLen", "maxlen", "desc", "references", "parentRef",
                           "isGeneralReference"}),
    "statistic": frozenset({"name", "type", "unit", "desc", "assign"}),
    "method": frozenset({"name", "desc"}),
    "arg": frozenset({"name", "type", "dir", "unit", "min", "max", "maxLen", "maxlen", "desc",
                      "default", "references"}),
    "eventArguments": frozenset(),
    "event": frozenset({"name", "sev", "args", "desc"}),
}


class XmlSchemas(list[SchemaClass]):
    """The classes of one XML schema file, in file order (object classes, then events).

    A plain list of :class:`~qmf_async.SchemaClass` with what the wire schema does
    not carry:

    * ``package``: the package name;
    * ``severities``: the default severity of each event class, by class key;
    * ``references``: ``references`` attributes by ``(class, property)`` or
      ``(class, method, argument)``;
    * ``source``: the file name (or ``"<string>"``).
    """

    package: str
    severities: dict[ClassKey, int]
    references: dict[tuple[str, ...], str]
    source: str

    def __init__(self, classes: Iterable[SchemaClass] = (), *, package: str = "",
                 severities: Mapping[ClassKey, int] | None = None,
                 references: Mapping[tuple[str, ...], str] | None = None,
                 source: str = "<string>") -> None:
        super().__init__(classes)
        self.package = package
        self.severities = dict(severities or {})
        self.references = dict(references or {})
        self.source = source

    def by_name(self, name: str) -> SchemaClass:
        """The class (object or event) called ``name``.

        Raises:
            KeyError: no such class in the file.
        """
        for schema in self:
            if schema.class_key.name == name:
                return schema
        raise KeyError(name)

    def severity(self, schema: SchemaClass | ClassKey | str) -> int:
        """The default severity of an event class (6, inform, when not an event)."""
        if isinstance(schema, str):
            schema = self.by_name(schema)
        key = schema.class_key if isinstance(schema, SchemaClass) else schema
        return self.severities.get(key, _DEFAULT_SEVERITY)

    def add_to(self, agent: _SchemaSink) -> None:
        """Serve every class with ``agent`` (event classes with their severity)."""
        for schema in self:
            if schema.is_event:
                agent.add_schema(schema, severity=self.severities.get(schema.class_key,
                                                                      _DEFAULT_SEVERITY))
            else:
                agent.add_schema(schema)


def load_schema_xml(source: XmlSource, *, lowercase_class_names: bool = False,
                    wire_references: bool = False, strict: bool = False) -> XmlSchemas:
    """Read a QMF XML schema and return its classes.

    ``source`` is a path (``str`` or path-like), XML text (a ``str`` whose first
    non-blank character is ``<``), XML bytes, or a file object.
    ``lowercase_class_names`` lower-cases object class names as qmf-gen does for qpidd
    (``<class name="Broker">`` is ``broker`` on the wire; event names are kept).
    ``wire_references`` puts ``references`` in the schema maps (``refPackage``,
    ``refClass``), which qpidd does not do.  ``strict`` rejects unknown tags and
    attributes instead of skipping them.

    The result is a list of :class:`~qmf_async.SchemaClass` (an :class:`XmlSchemas`,
    which also carries the events' default severities: pass it to an agent with
    :meth:`XmlSchemas.add_to`).

    Raises:
        UsageError: the file cannot be read, is not well-formed XML, or declares
            something invalid (unknown type, missing name, bad access code, bad
            severity, duplicate names ...); the message starts with ``file:line:``.
    """
    name, data = _read_source(source)
    root = _parse(name, data)
    return _Loader(name, lowercase_class_names, wire_references, strict).load(root)


def load_schema_xml_with_severity(source: XmlSource, **options: Any
                                  ) -> tuple[list[SchemaClass], dict[ClassKey, int]]:
    """:func:`load_schema_xml`, returning ``(classes, {event class key: severity})``.

    Raises:
        UsageError: as :func:`load_schema_xml`.
    """
    schemas = load_schema_xml(source, **options)
    return list(schemas), dict(schemas.severities)


# --------------------------------------------------------------------------- reading


def _read_source(source: XmlSource) -> tuple[str, str | bytes]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "<bytes>", bytes(source)
    if isinstance(source, str) and source.lstrip("\ufeff \t\r\n").startswith("<"):
        return "<string>", source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                return str(path), f.read()
        except OSError as exc:
            raise UsageError(f"{path}: cannot read schema file: {exc.strerror or exc}") from exc
    read = getattr(source, "read", None)
    if callable(read):
        name = str(getattr(source, "name", "<stream>"))
        data = read()
        if isinstance(data, (str, bytes)):
            return name, data
    raise UsageError(f"cannot read an XML schema from {type(source).__name__}")


class _Node:
    __slots__ = ("attrs", "children", "line", "tag")

    def __init__(self, tag: str, attrs: dict[str, str], line: int) -> None:
        self.tag = tag
        self.attrs = attrs
        self.line = line
        self.children: list[_Node] = []


def _parse(name: str, data: str | bytes) -> _Node:
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    stack: list[_Node] = []
    roots: list[_Node] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        node = _Node(tag, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def no_entities(entity: str, *args: Any) -> None:
        raise UsageError(f"{name}:{parser.CurrentLineNumber}: entity declarations "
                         f"(<!ENTITY {entity} ...>) are not allowed in a schema file")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.EntityDeclHandler = no_entities
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise UsageError(f"{name}:{exc.lineno}:{exc.offset + 1}: malformed XML: "
                         f"{expat.ErrorString(exc.code)}") from exc
    if not roots:  # pragma: no cover - expat reports "no element found" first
        raise UsageError(f"{name}: no XML element")
    return roots[0]


# --------------------------------------------------------------------------- building


class _Loader:
    def __init__(self, name: str, lowercase: bool, wire_refs: bool, strict: bool) -> None:
        self.name = name
        self.lowercase = lowercase
        self.wire_refs = wire_refs
        self.strict = strict
        self.package = ""
        self.groups: dict[str, _Node] = {}
        self.event_args: dict[str, tuple[SchemaArgument, _Node]] = {}
        self.references: dict[tuple[str, ...], str] = {}

    # ---------------------------------------------------------------- helpers

    def error(self, node: _Node, text: str) -> UsageError:
        return UsageError(f"{self.name}:{node.line}: <{node.tag}> {text}")

    def check_attrs(self, node: _Node, kind: str | None = None) -> None:
        if not self.strict:
            return
        known = _KNOWN_ATTRS.get(kind or node.tag, frozenset())
        for attr in node.attrs:
            if attr not in known:
                raise self.error(node, f"has unknown attribute {attr!r}")

    def unknown_tag(self, node: _Node, where: str) -> None:
        if self.strict:
            raise self.error(node, f"is not allowed in <{where}>")

    def name_of(self, node: _Node) -> str:
        value = node.attrs.get("name", "").strip()
        if not value:
            raise self.error(node, "has no name")
        if len(value.encode()) > 255:
            raise self.error(node, f"name {value[:20]!r}... is longer than 255 bytes")
        return value

    def flag(self, node: _Node, attr: str) -> bool:
        value = node.attrs.get(attr)
        if value is None:
            return False
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
        raise self.error(node, f"{attr}={value!r} is not 'y' or 'n'")

    def integer(self, node: _Node, *attrs: str) -> int | None:
        for attr in attrs:
            value = node.attrs.get(attr)
            if value is None:
                continue
            text = value.strip()
            try:
                number = int(text, 10)  # decimal, leading zeros allowed
            except ValueError:
                try:
                    number = int(text, 0)  # 0x100, 0o17, 0b101
                except ValueError:
                    raise self.error(node, f"{attr}={value!r} is not an integer") from None
            if not _INT32[0] <= number <= _INT32[1]:
                raise self.error(node, f"{attr}={value!r} does not fit a signed 32-bit integer")
            return number
        return None

    def type_name(self, node: _Node) -> str:
        value = node.attrs.get("type", "").strip()
        if not value:
            raise self.error(node, f"{self.name_of(node)!r} has no type")
        return value

    def direct_type(self, node: _Node, *, counters: bool) -> QmfType:
        text = self.type_name(node)
        t = text.lower()
        if t in _DIRECT:
            return _DIRECT[t]
        if counters and t in _COUNT:
            return _COUNT[t]
        if t in _HILO or t in _MMA or t in _COUNT:
            raise self.error(node, f"type {text!r} is only allowed in <statistic>")
        raise self.error(node, f"unknown type {text!r}")

    def text(self, node: _Node, attr: str) -> str | None:
        return node.attrs.get(attr)

    def class_name(self, node: _Node) -> str:
        name = self.name_of(node)
        return name.lower() if self.lowercase else name

    def reference(self, node: _Node, key: tuple[str, ...]) -> tuple[str | None, str | None]:
        ref = node.attrs.get("references")
        if ref is None or not ref.strip():
            return None, None
        ref = ref.strip()
        self.references[key] = ref
        if not self.wire_refs:
            return None, None
        package, _, cls = ref.rpartition(":")
        if self.lowercase:
            cls = cls.lower()
        return package or self.package, cls

    # ---------------------------------------------------------------- document

    def load(self, root: _Node) -> XmlSchemas:
        if root.tag != "schema":
            raise self.error(root, "is not a QMF schema (the document element must be <schema>)")
        self.check_attrs(root)
        package = root.attrs.get("package", "").strip()
        if not package:
            raise self.error(root, "has no package")
        if len(package.encode()) > 255:
            raise self.error(root, "package name is longer than 255 bytes")
        self.package = package
        for child in root.children:
            if child.tag == "group":
                self.check_attrs(child)
                gname = self.name_of(child)
                if gname in self.groups:
                    raise self.error(child, f"group {gname!r} is defined twice "
                                            f"(first at line {self.groups[gname].line})")
                self.groups[gname] = child
            elif child.tag == "eventArguments":
                self.check_attrs(child)
                self.load_event_arguments(child)
        classes: list[SchemaClass] = []
        events: list[SchemaClass] = []
        severities: dict[ClassKey, int] = {}
        seen: dict[tuple[str, str], int] = {}
        for child in root.children:
            if child.tag == "class":
                schema = self.load_class(child)
                target = classes
            elif child.tag == "event":
                schema, sev = self.load_event(child)
                severities[schema.class_key] = sev
                target = events
            elif child.tag in ("group", "eventArguments"):
                continue
            else:
                self.unknown_tag(child, "schema")
                continue
            what = (child.tag, schema.class_key.name)
            if what in seen:
                raise self.error(child, f"{schema.class_key.name!r} is declared twice "
                                        f"(first at line {seen[what]})")
            seen[what] = child.line
            target.append(schema)
        return XmlSchemas(classes + events, package=package, severities=severities,
                          references=self.references, source=self.name)

    # ---------------------------------------------------------------- object classes

    def load_class(self, node: _Node) -> SchemaClass:
        self.check_attrs(node)
        cname = self.class_name(node)
        props: list[SchemaProperty] = []
        stats: list[SchemaStatistic] = []
        methods: list[SchemaMethod] = []
        names: dict[str, int] = {}
        method_names: dict[str, int] = {}
        self.load_members(node, cname, props, stats, methods, names, method_names, ())
        try:
            return object_class(self.package, cname, properties=props, statistics=stats,
                                methods=methods)
        except UsageError as exc:
            raise self.error(node, f"{cname!r}: {exc}") from exc

    def load_members(self, node: _Node, cname: str, props: list[SchemaProperty],
                     stats: list[SchemaStatistic], methods: list[SchemaMethod],
                     names: dict[str, int], method_names: dict[str, int],
                     expanding: tuple[str, ...]) -> None:
        def claim(child: _Node, name: str, table: dict[str, int]) -> None:
            if name in table:
                raise self.error(child, f"{name!r} is declared twice in class {cname!r} "
                                        f"(first at line {table[name]})")
            table[name] = child.line

        for child in node.children:
            if child.tag == "property":
                p = self.load_property(child, cname)
                claim(child, p.name, names)
                props.append(p)
            elif child.tag == "statistic":
                for s in self.load_statistic(child):
                    claim(child, s.name, names)
                    stats.append(s)
            elif child.tag == "method":
                m = self.load_method(child, cname)
                claim(child, m.name, method_names)
                methods.append(m)
            elif child.tag == "group":
                self.check_attrs(child)
                gname = self.name_of(child)
                fragment = self.groups.get(gname)
                if fragment is None:
                    raise self.error(child, f"refers to undefined group {gname!r}")
                if gname in expanding:
                    raise self.error(child, f"group {gname!r} includes itself")
                self.load_members(fragment, cname, props, stats, methods, names, method_names,
                                  (*expanding, gname))
            else:
                self.unknown_tag(child, node.tag)

    def load_property(self, node: _Node, cname: str) -> SchemaProperty:
        self.check_attrs(node)
        name = self.name_of(node)
        t = self.direct_type(node, counters=False)
        access_text = node.attrs.get("access", "RO").strip()
        try:
            access = Access[access_text.upper()]
        except KeyError:
            raise self.error(node, f"{name!r} has bad access code {access_text!r} "
                                   "(RO, RW or RC)") from None
        ref_package, ref_class = self.reference(node, (cname, name))
        return SchemaProperty(
            name, t, access,
            index=self.flag(node, "index"), optional=self.flag(node, "optional"),
            unit=self.text(node, "unit"), min=self.integer(node, "min"),
            max=self.integer(node, "max"), maxlen=self.integer(node, "maxLen", "maxlen"),
            desc=self.text(node, "desc"), ref_package=ref_package, ref_class=ref_class)

    def load_statistic(self, node: _Node) -> list[SchemaStatistic]:
        self.check_attrs(node)
        name = self.name_of(node)
        text = self.type_name(node)
        t = text.lower()
        unit, desc = self.text(node, "unit"), self.text(node, "desc")

        def suffixed(suffix: str) -> str | None:
            return None if desc is None else f"{desc} ({suffix})"

        if t in _HILO:
            base = _HILO[t]
            return [SchemaStatistic(name, base, unit, desc),
                    SchemaStatistic(name + "High", base, unit, suffixed("High")),
                    SchemaStatistic(name + "Low", base, unit, suffixed("Low"))]
        if t in _MMA:
            base = _MMA[t]
            return [SchemaStatistic(name + part, base, unit, suffixed(part))
                    for part in ("Samples", "Min", "Max", "Average")]
        return [SchemaStatistic(name, self.direct_type(node, counters=True), unit, desc)]

    def load_method(self, node: _Node, cname: str) -> SchemaMethod:
        self.check_attrs(node)
        mname = self.name_of(node)
        args: list[SchemaArgument] = []
        seen: dict[str, int] = {}
        for child in node.children:
            if child.tag != "arg":
                self.unknown_tag(child, "method")
                continue
            self.check_attrs(child)
            aname = self.name_of(child)
            if aname in seen:
                raise self.error(child, f"argument {aname!r} of {cname}.{mname} is declared "
                                        f"twice (first at line {seen[aname]})")
            seen[aname] = child.line
            direction = child.attrs.get("dir", "I").strip().upper()
            if direction not in ("I", "O", "IO"):
                raise self.error(child, f"argument {aname!r} has bad dir "
                                        f"{child.attrs['dir']!r} (I, O or IO)")
            ref_package, ref_class = self.reference(child, (cname, mname, aname))
            args.append(SchemaArgument(
                aname, self.direct_type(child, counters=True), direction,
                unit=self.text(child, "unit"), min=self.integer(child, "min"),
                max=self.integer(child, "max"), maxlen=self.integer(child, "maxLen", "maxlen"),
                desc=self.text(child, "desc"), default=self.text(child, "default"),
                ref_package=ref_package, ref_class=ref_class))
        return SchemaMethod(mname, args, self.text(node, "desc"))

    # ---------------------------------------------------------------- events

    def event_argument(self, node: _Node) -> SchemaArgument:
        self.check_attrs(node, "arg")
        # as qmf-gen: an event argument's map holds name, type, unit and desc only
        return SchemaArgument(self.name_of(node), self.direct_type(node, counters=True),
                              unit=self.text(node, "unit"), desc=self.text(node, "desc"))

    def load_event_arguments(self, node: _Node) -> None:
        for child in node.children:
            if child.tag != "arg":
                self.unknown_tag(child, "eventArguments")
                continue
            arg = self.event_argument(child)
            if arg.name in self.event_args:
                raise self.error(child, f"event argument {arg.name!r} is declared twice "
                                        f"(first at line {self.event_args[arg.name][1].line})")
            self.event_args[arg.name] = (arg, child)

    def load_event(self, node: _Node) -> tuple[SchemaClass, int]:
        self.check_attrs(node)
        ename = self.name_of(node)
        sev_text = node.attrs.get("sev", "inform").strip()
        sev = SEVERITY_LEVELS.get(sev_text.lower())
        if sev is None and sev_text.isdigit() and int(sev_text) <= 7:
            sev = int(sev_text)
        if sev is None:
            raise self.error(node, f"event {ename!r} has unknown severity {sev_text!r} "
                                   f"({', '.join(SEVERITY_LEVELS)} or 0..7)")
        args: list[SchemaArgument] = []
        seen: set[str] = set()
        for item in node.attrs.get("args", "").split(","):
            aname = item.strip()
            if not aname:
                continue
            found = self.event_args.get(aname)
            if found is None:
                raise self.error(node, f"event {ename!r} uses argument {aname!r}, which no "
                                       "<eventArguments> declares")
            if aname in seen:
                raise self.error(node, f"event {ename!r} lists argument {aname!r} twice")
            seen.add(aname)
            args.append(found[0])
        for child in node.children:
            if child.tag != "arg":
                self.unknown_tag(child, "event")
                continue
            arg = self.event_argument(child)
            if arg.name in seen:
                raise self.error(child, f"event {ename!r} declares argument {arg.name!r} twice")
            seen.add(arg.name)
            args.append(arg)
        try:
            return event_class(self.package, ename, args), sev
        except UsageError as exc:
            raise self.error(node, f"{ename!r}: {exc}") from exc
