"""TEMPORARY (replaced by the v2 codec's own helpers): QMF v2 bodies over AMQP 0-9-1."""

from __future__ import annotations

from typing import Any

from ..errors import DecodeError, EncodeError
from ._amqp010 import decode_list, decode_map, encode_list, encode_map


def decode_v2_body(content_type: str | None, raw: bytes) -> Any:
    """Raises: DecodeError."""
    value: Any
    if content_type == "amqp/map":
        value, end = decode_map(raw, 0, len(raw))
    elif content_type == "amqp/list":
        value, end = decode_list(raw, 0, len(raw))
    else:
        raise DecodeError(f"not a QMF v2 body: content type {content_type!r}")
    if end != len(raw):
        raise DecodeError(f"{len(raw) - end} bytes after the {content_type} body")
    return value


def encode_v2_body(value: Any) -> tuple[str, bytes]:
    """Raises: EncodeError."""
    out = bytearray()
    if isinstance(value, dict):
        encode_map(out, value)
        return "amqp/map", bytes(out)
    if isinstance(value, list):
        encode_list(out, value)
        return "amqp/list", bytes(out)
    raise EncodeError(f"a QMF v2 body is a dict or a list, not {type(value).__name__}")
