"""The agent side of QMF: serve your application's objects, methods and events.

>>> from qmf_async.agent import Agent, object_class
"""

from __future__ import annotations

from ..wire import SchemaArgument, SchemaMethod, SchemaProperty, SchemaStatistic
from ._agent import Agent
from ._declare import compute_hash, event_class, method, object_class
from ._methods import MethodHandler, RequestContext, current_request
from ._objects import ManagedObject
from ._options import AgentOptions, Authorizer
from ._xml import XmlSchemas, load_schema_xml, load_schema_xml_with_severity

#: Short aliases for declaring schemas.
Property = SchemaProperty
Statistic = SchemaStatistic
Arg = SchemaArgument

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
