"""Schema value types: classes, properties, statistics, methods and arguments.

Each record converts to and from the AMQP 0-10 map that carries it in a schema
response.  The encoding is qpidd's: keys in sorted order, strings as vbin16,
``type``/``access`` as uint8, flags and numeric limits as int32.  Keys this module
does not know are kept in ``extra`` (with their wire types) and written back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..errors import DecodeError, UnknownClassError
from ..frozen import frozen
from ._amqp010 import WireMap
from ._values import Access, ClassKey, ClassKind, QmfType, to_access, to_qmf_type

__all__ = [
    "SchemaProperty",
    "SchemaStatistic",
    "SchemaArgument",
    "SchemaMethod",
    "SchemaClass",
]

_VBIN16 = 0x90
_UINT8 = 0x02
_INT32 = 0x21

# map key -> (attribute, wire type code, kind) ; kind: "str", "int", "bool", "raw"
_FIELDS: dict[str, tuple[str, int, str]] = {
    "name": ("name", _VBIN16, "str"),
    "type": ("type", _UINT8, "type"),
    "access": ("access", _UINT8, "access"),
    "index": ("index", _INT32, "bool"),
    "optional": ("optional", _INT32, "bool"),
    "unit": ("unit", _VBIN16, "str"),
    "min": ("min", _INT32, "int"),
    "max": ("max", _INT32, "int"),
    "maxlen": ("maxlen", _INT32, "int"),
    "desc": ("desc", _VBIN16, "str"),
    "refPackage": ("ref_package", _VBIN16, "str"),
    "refClass": ("ref_class", _VBIN16, "str"),
    "dir": ("direction", _VBIN16, "str"),
    "default": ("default", _VBIN16, "str"),
    "argCount": ("arg_count", _INT32, "int"),
}
_ATTR_TO_KEY = {attr: key for key, (attr, _, _) in _FIELDS.items()}
_ALWAYS = {"name", "type", "access", "index", "optional", "argCount"}


def _as_text(value: Any, key: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"schema field {key!r} is not UTF-8") from exc
    raise DecodeError(f"schema field {key!r} has type {type(value).__name__}, expected text")


def _as_int(value: Any, key: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (bytes, str)):
        try:
            return int(value)
        except ValueError:
            pass
    raise DecodeError(f"schema field {key!r} is not an integer")


def _from_map(m: Mapping[str, Any], allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    """Turn a schema map into constructor keywords; unknown keys go to ``extra``."""
    kwargs: dict[str, Any] = {}
    extra = WireMap()
    types = m.types if isinstance(m, WireMap) else {}
    for key, value in m.items():
        spec = _FIELDS.get(key)
        if spec is None or spec[0] not in allowed:
            extra[key] = value
            if key in types:
                extra.types[key] = types[key]
            continue
        attr, _, kind = spec
        if kind == "str":
            kwargs[attr] = _as_text(value, key)
        elif kind == "bool":
            kwargs[attr] = bool(_as_int(value, key))
        elif kind == "type":
            code = _as_int(value, key)
            try:
                kwargs[attr] = QmfType(code)
            except ValueError:
                raise DecodeError(
                    f"{what} {m.get('name')!r} has unknown type code {code}") from None
        elif kind == "access":
            code = _as_int(value, key)
            try:
                kwargs[attr] = Access(code)
            except ValueError:
                raise DecodeError(f"{what} has unknown access code {code}") from None
        else:
            kwargs[attr] = _as_int(value, key)
    if "name" not in kwargs:
        raise DecodeError(f"{what} record without a name")
    if "type" in allowed and "type" not in kwargs:
        raise DecodeError(f"{what} {kwargs['name']!r} has no type")
    if extra:
        kwargs["extra"] = extra
    return kwargs


def _to_map(record: Any, attrs_in_order: tuple[str, ...]) -> WireMap:
    m = WireMap()
    items: list[tuple[str, Any, int]] = []
    for attr in attrs_in_order:
        key = _ATTR_TO_KEY[attr]
        value = getattr(record, attr)
        if value is None and key not in _ALWAYS:
            continue
        code = _FIELDS[key][1]
        if isinstance(value, bool):
            value = int(value)
        elif isinstance(value, str) and code == _VBIN16:
            value = value.encode("utf-8")
        elif hasattr(value, "value") and isinstance(value, int):
            value = int(value)
        items.append((key, value, code))
    extra = record.extra
    for key, value in extra.items():
        extra_code = extra.types.get(key) if isinstance(extra, WireMap) else None
        items.append((key, value, extra_code if extra_code is not None else -1))
    items.sort(key=lambda item: item[0].encode())
    for key, value, code in items:
        m[key] = value
        if code >= 0:
            m.types[key] = code
    return m


def _extra_field() -> Any:
    return attrs.field(factory=WireMap, kw_only=True, converter=_to_wiremap)


def _to_wiremap(value: Any) -> WireMap:
    if isinstance(value, WireMap):
        return value
    return WireMap(value or {})


@frozen(slots=True)
class SchemaProperty:
    """A property of an object class (configuration, sent in ``c`` and ``g``)."""

    name: str
    type: QmfType = attrs.field(converter=to_qmf_type)
    access: Access = attrs.field(default=Access.RO, converter=to_access)
    index: bool = False
    optional: bool = False
    unit: str | None = None
    min: int | None = None
    max: int | None = None
    maxlen: int | None = None
    desc: str | None = None
    ref_package: str | None = None
    ref_class: str | None = None
    extra: WireMap = _extra_field()

    _ATTRS = ("name", "type", "access", "index", "optional", "unit", "min", "max",
              "maxlen", "desc", "ref_package", "ref_class")

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> SchemaProperty:
        """Build from a schema-response map. Raises: DecodeError."""
        return cls(**_from_map(m, cls._ATTRS, "property"))

    def to_map(self) -> WireMap:
        """The schema-response map, encoded as qpidd does."""
        return _to_map(self, self._ATTRS)


@frozen(slots=True)
class SchemaStatistic:
    """A statistic of an object class (instrumentation, sent in ``i`` and ``g``)."""

    name: str
    type: QmfType = attrs.field(converter=to_qmf_type)
    unit: str | None = None
    desc: str | None = None
    extra: WireMap = _extra_field()

    _ATTRS = ("name", "type", "unit", "desc")

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> SchemaStatistic:
        """Build from a schema-response map. Raises: DecodeError."""
        return cls(**_from_map(m, cls._ATTRS, "statistic"))

    def to_map(self) -> WireMap:
        """The schema-response map, encoded as qpidd does."""
        return _to_map(self, self._ATTRS)


@frozen(slots=True)
class SchemaArgument:
    """An argument of a method (with ``direction`` I, O or IO) or of an event."""

    name: str
    type: QmfType = attrs.field(converter=to_qmf_type)
    direction: str | None = None
    unit: str | None = None
    min: int | None = None
    max: int | None = None
    maxlen: int | None = None
    desc: str | None = None
    default: str | None = None
    ref_package: str | None = None
    ref_class: str | None = None
    extra: WireMap = _extra_field()

    _ATTRS = ("name", "type", "direction", "unit", "min", "max", "maxlen", "desc",
              "default", "ref_package", "ref_class")

    @property
    def is_input(self) -> bool:
        """True for I and IO arguments (sent in the method request)."""
        return self.direction is None or "I" in self.direction

    @property
    def is_output(self) -> bool:
        """True for O and IO arguments (returned in the method response)."""
        return self.direction is not None and "O" in self.direction

    @classmethod
    def from_map(cls, m: Mapping[str, Any]) -> SchemaArgument:
        """Build from a schema-response map. Raises: DecodeError."""
        return cls(**_from_map(m, cls._ATTRS, "argument"))

    def to_map(self) -> WireMap:
        """The schema-response map, encoded as qpidd does."""
        return _to_map(self, self._ATTRS)


def _arguments(items: Iterable[SchemaArgument]) -> tuple[SchemaArgument, ...]:
    return tuple(items)


@frozen(slots=True)
class SchemaMethod:
    """A method of an object class."""

    name: str
    arguments: tuple[SchemaArgument, ...] = attrs.field(default=(), converter=_arguments)
    desc: str | None = None
    extra: WireMap = _extra_field()

    @property
    def arg_count(self) -> int:
        return len(self.arguments)

    _in_args: tuple[SchemaArgument, ...] = attrs.field(init=False, eq=False, repr=False)
    _out_args: tuple[SchemaArgument, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_in_args", tuple(a for a in self.arguments if a.is_input))
        object.__setattr__(self, "_out_args", tuple(a for a in self.arguments if a.is_output))

    @property
    def in_args(self) -> tuple[SchemaArgument, ...]:
        """I and IO arguments in schema order."""
        return self._in_args

    @property
    def out_args(self) -> tuple[SchemaArgument, ...]:
        """O and IO arguments in schema order."""
        return self._out_args

    def to_map(self) -> WireMap:
        """The method header map (name, argCount, desc), encoded as qpidd does."""
        return _to_map(self, ("name", "arg_count", "desc"))

    @classmethod
    def header_from_map(cls, m: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
        """Constructor keywords and the argument count from a method header map.

        Raises:
            DecodeError: the map is not a method header.
        """
        kwargs = _from_map(m, ("name", "arg_count", "desc"), "method")
        count = kwargs.pop("arg_count", None)
        if count is None or count < 0:
            raise DecodeError(f"method {kwargs['name']!r} has no argCount")
        return kwargs, count


def _properties(items: Iterable[SchemaProperty]) -> tuple[SchemaProperty, ...]:
    return tuple(items)


def _statistics(items: Iterable[SchemaStatistic]) -> tuple[SchemaStatistic, ...]:
    return tuple(items)


def _methods(items: Iterable[SchemaMethod]) -> tuple[SchemaMethod, ...]:
    return tuple(items)


@frozen(slots=True)
class SchemaClass:
    """A full schema: an object class (properties, statistics, methods) or an
    event class (arguments)."""

    kind: ClassKind = attrs.field(converter=ClassKind)
    class_key: ClassKey
    properties: tuple[SchemaProperty, ...] = attrs.field(default=(), converter=_properties)
    statistics: tuple[SchemaStatistic, ...] = attrs.field(default=(), converter=_statistics)
    methods: tuple[SchemaMethod, ...] = attrs.field(default=(), converter=_methods)
    arguments: tuple[SchemaArgument, ...] = attrs.field(default=(), converter=_arguments)
    _methods_by_name: dict[str, SchemaMethod] = attrs.field(
        init=False, eq=False, repr=False, hash=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_methods_by_name", {m.name: m for m in self.methods})

    @property
    def is_event(self) -> bool:
        return self.kind == ClassKind.EVENT

    def method(self, name: str) -> SchemaMethod:
        """The method called ``name``.

        Raises:
            UnknownClassError: the class has no such method.
        """
        try:
            return self._methods_by_name[name]
        except KeyError:
            raise UnknownClassError(f"{self.class_key.package}:{self.class_key.name} has no "
                                    f"method {name!r}") from None

    def find_method(self, name: str) -> SchemaMethod | None:
        """The method called ``name``, or None."""
        return self._methods_by_name.get(name)

    @property
    def index_names(self) -> tuple[str, ...]:
        """Names of the index properties, in schema order."""
        return tuple(p.name for p in self.properties if p.index)
