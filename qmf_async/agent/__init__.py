"""The agent side of QMF: serve your application's objects, methods and events.

>>> from qmf_async.agent import Agent, object_class
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # at run time each name is imported on first use (__getattr__)
    from ..wire import SchemaArgument, SchemaMethod, SchemaProperty, SchemaStatistic

    # short aliases for declaring schemas
    from ..wire import SchemaArgument as Arg
    from ..wire import SchemaProperty as Property
    from ..wire import SchemaStatistic as Statistic
    from ._agent import Agent
    from ._declare import compute_hash, event_class, method, object_class
    from ._methods import MethodHandler, RequestContext, current_request
    from ._objects import ManagedObject
    from ._options import AgentOptions, Authorizer
    from ._xml import XmlSchemas, load_schema_xml, load_schema_xml_with_severity

__all__ = [
    "Agent",
    "AgentOptions",
    "Authorizer",
    "ManagedObject",
    "MethodHandler",
    "RequestContext",
    "current_request",
    "object_class",
    "event_class",
    "method",
    "compute_hash",
    "load_schema_xml",
    "load_schema_xml_with_severity",
    "XmlSchemas",
    "Property",
    "Statistic",
    "Arg",
    "SchemaProperty",
    "SchemaStatistic",
    "SchemaMethod",
    "SchemaArgument",
]


#: each public name -> the module it is imported from on first use (``module:name``
#: when it is renamed here)
_LAZY: dict[str, str] = {
    "SchemaArgument": "..wire",
    "SchemaMethod": "..wire",
    "SchemaProperty": "..wire",
    "SchemaStatistic": "..wire",
    "Agent": "._agent",
    "AgentOptions": "._options",
    "Authorizer": "._options",
    "MethodHandler": "._methods",
    "RequestContext": "._methods",
    "current_request": "._methods",
    "compute_hash": "._declare",
    "event_class": "._declare",
    "method": "._declare",
    "object_class": "._declare",
    "ManagedObject": "._objects",
    "XmlSchemas": "._xml",
    "load_schema_xml": "._xml",
    "load_schema_xml_with_severity": "._xml",
    "Arg": "..wire:SchemaArgument",
    "Property": "..wire:SchemaProperty",
    "Statistic": "..wire:SchemaStatistic",
}


if not TYPE_CHECKING:  # type checkers read the imports above; this is the run time
    from ..lazy import lazy_names

    __getattr__, __dir__ = lazy_names(globals(), _LAZY)
    del lazy_names
