"""``--web.config.file``: the web configuration of Prometheus' exporter-toolkit (the
file Prometheus itself and the official exporters read): TLS with a certificate and
key, client certificates (a CA, a policy, allowed SANs), basic-auth users with bcrypt
hashes, and extra response headers.

:func:`load_web_config` reads and checks the whole file at start (files, keys, hashes,
the TLS context): a bad file is one :class:`WebConfigError`.  :class:`BasicAuth` checks
``Authorization: Basic`` headers (bcrypt, with a small cache of recent answers, as the
toolkit does).  PyYAML reads the file and bcrypt checks the passwords (extra
``prometheus``).
"""

from __future__ import annotations

import base64
import binascii
import collections
import contextlib
import hashlib
import ipaddress
import os
import re
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from qmf_async.errors import UsageError

from ..frozen import frozen

__all__ = ["WebConfig", "TlsConfig", "WebConfigError", "BasicAuth", "load_web_config",
           "parse_web_config"]


class WebConfigError(UsageError):
    """The web configuration file cannot be read or is not valid (one line)."""


#: client_auth_type values -> the ssl verify mode (None: not supported by Python's ssl)
CLIENT_AUTH: Final[Mapping[str, ssl.VerifyMode | None]] = {
    "NoClientCert": ssl.CERT_NONE,
    # asked for but never verified nor used: the same as not asking, for what it lets in
    "RequestClientCert": ssl.CERT_NONE,
    "RequireAnyClientCert": None,
    "RequireClientCert": None,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS: Final[Mapping[str, ssl.TLSVersion]] = {
    "TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3,
}
#: Go's cipher suite names (crypto/tls CipherSuites) -> OpenSSL's; TLS 1.3 suites are
#: fixed by both (named, accepted and left as they are)
CIPHERS: Final[Mapping[str, str | None]] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}
#: Go's curve names -> OpenSSL's
CURVES: Final[Mapping[str, str]] = {
    "CurveP256": "prime256v1", "CurveP384": "secp384r1", "CurveP521": "secp521r1",
    "X25519": "X25519",
}
#: the response headers the file may set, with their allowed values (None: any)
HEADERS: Final[Mapping[str, tuple[str, ...] | None]] = {
    "Strict-Transport-Security": None,
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": None,
    "Content-Security-Policy": None,
}
_TOP: Final = frozenset({"tls_server_config", "http_server_config", "basic_auth_users",
                         "rate_limit"})
_TLS: Final = frozenset({"cert", "key", "client_ca", "cert_file", "key_file",
                         "client_auth_type", "client_ca_file", "client_allowed_sans",
                         "min_version", "max_version", "cipher_suites",
                         "prefer_server_cipher_suites", "curve_preferences"})
_HTTP: Final = frozenset({"http2", "headers"})
_BCRYPT: Final = re.compile(r"\$2[abxy]?\$\d\d\$[./A-Za-z0-9]{53}")
#: a bcrypt hash (cost 10) of a password nobody has: unknown users take as long as known
_DECOY: Final = b"$2b$10$PZEgOhm7JeBWqus.9KH7DO41JkfharHNkWExFgZ1WX0VT6pL2Lrh6"
#: answers of recent (user, hash, password) checks kept (bcrypt costs ~50 ms each)
AUTH_CACHE: Final = 100


@frozen
class TlsConfig:
    """The checked ``tls_server_config``: :attr:`context` serves it; ``allowed_sans``
    (when not empty) must name one of the client certificate's SANs."""

    context: ssl.SSLContext = attrs.field(eq=False)
    client_auth: str
    allowed_sans: tuple[str, ...] = ()

    def peer_refused(self, sock: ssl.SSLSocket) -> str | None:
        """Why the peer's certificate is refused by ``client_allowed_sans``; None when
        it is let in."""
        if not self.allowed_sans:
            return None
        cert = sock.getpeercert()
        if not cert:
            return "no client certificate to match client_allowed_sans"
        names = set()
        entries: Any = cert.get("subjectAltName", ())
        for kind, value in entries:
            if kind == "IP Address":
                with contextlib.suppress(ValueError):
                    value = str(ipaddress.ip_address(str(value).strip()))
            names.add(str(value))
        if names & set(self.allowed_sans):
            return None
        return f"client certificate SANs {sorted(names)} not in client_allowed_sans"


@frozen
class WebConfig:
    """A checked web configuration file: TLS (None: plain HTTP), basic-auth users
    (name -> bcrypt hash; empty: no authentication), extra response headers."""

    tls: TlsConfig | None = None
    users: Mapping[str, bytes] = attrs.field(factory=dict, eq=False)
    headers: tuple[tuple[str, str], ...] = ()
    http2: bool = True

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read and check the web configuration file at ``path`` (relative file names in it
    are relative to its directory).

    Raises:
        WebConfigError: unreadable, not YAML, an unknown key, a bad value, a file it
            names cannot be loaded, or PyYAML/bcrypt are missing.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"cannot read {os.fspath(path)}: {_reason(exc)}") from None
    return parse_web_config(text, Path(path).resolve().parent)


def parse_web_config(text: str, directory: Path) -> WebConfig:
    """Check the YAML ``text`` of a web configuration (files relative to ``directory``).

    Raises:
        WebConfigError: see :func:`load_web_config`.
    """
    data = _yaml(text)
    if data is None:
        return WebConfig()
    top = _mapping(data, "the file", _TOP)
    if top.get("rate_limit") is not None:
        raise WebConfigError("rate_limit is not supported by qmf exporter")
    users = _users(top.get("basic_auth_users"))
    headers, http2 = _http(top.get("http_server_config"))
    tls = _tls(top.get("tls_server_config"), directory)
    return WebConfig(tls=tls, users=users, headers=headers, http2=http2)


class BasicAuth:
    """Checks ``Authorization`` headers against the users' bcrypt hashes (thread-safe:
    one bcrypt at a time, the last :data:`AUTH_CACHE` answers cached)."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        import bcrypt

        self._check: Callable[[bytes, bytes], bool] = bcrypt.checkpw
        self._users = dict(users)
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[bytes, bool] = collections.OrderedDict()

    def allows(self, authorization: str | None) -> bool:
        """Whether the header value names a user with its password."""
        if not authorization:
            return False
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True) \
                .decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        known = user in self._users
        hashed = self._users.get(user, _DECOY)
        key = hashlib.sha256(b"\0".join((user.encode(), hashed, password.encode()))).digest()
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = bool(self._check(password.encode(), hashed)) and known
                self._cache[key] = cached
                while len(self._cache) > AUTH_CACHE:
                    self._cache.popitem(last=False)
            else:
                self._cache.move_to_end(key)
        return cached


# --------------------------------------------------------------------------- checks


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def _yaml(text: str) -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with the extra
        raise WebConfigError("reading it needs PyYAML: pip install "
                             "'qmf-async[prometheus]'") from None

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        """SafeLoader refusing a key given twice (as the toolkit's strict reading)."""

    def mapping(loader: Any, node: Any) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in result:
                line = key_node.start_mark.line + 1
                raise WebConfigError(f"key {key!r} given twice (line {line})")
            result[key] = loader.construct_object(value_node, deep=True)
        return result

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise WebConfigError(f"not YAML: {' '.join(str(exc).split())}") from None


def _mapping(value: Any, where: str, keys: frozenset[str] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where} must be a mapping, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise WebConfigError(f"{where}: a key must be a string, not {key!r}")
        if keys is not None and key not in keys:
            raise WebConfigError(f"unknown key {key!r} in {where} (known: "
                                 f"{', '.join(sorted(keys))})")
    return value


def _string(section: Mapping[str, Any], key: str, where: str) -> str:
    value = section.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WebConfigError(f"{where}.{key} must be a string, not {value!r}")
    return value


def _strings(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WebConfigError(f"{where}.{key} must be a list of strings")
    return tuple(value)


def _bool(section: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = section.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise WebConfigError(f"{where}.{key} must be true or false, not {value!r}")
    return value


def _users(value: Any) -> dict[str, bytes]:
    users = _mapping(value, "basic_auth_users", None)
    found: dict[str, bytes] = {}
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not _BCRYPT.fullmatch(hashed.strip()):
            raise WebConfigError(f"basic_auth_users.{user}: not a bcrypt hash "
                                 "(htpasswd -nBC 10 '' | tr -d ':\\n' makes one)")
        found[user] = hashed.strip().encode()
    if found:
        try:
            import bcrypt  # noqa: F401  (checked at start, used per request)
        except ImportError:  # pragma: no cover - bcrypt comes with the extra
            raise WebConfigError("basic_auth_users needs bcrypt: pip install "
                                 "'qmf-async[prometheus]'") from None
    return found


def _http(value: Any) -> tuple[tuple[tuple[str, str], ...], bool]:
    where = "http_server_config"
    section = _mapping(value, where, _HTTP)
    http2 = _bool(section, "http2", where, True)
    headers = _mapping(section.get("headers"), f"{where}.headers", frozenset(HEADERS))
    found = []
    for name, text in headers.items():
        if text is None or text == "":
            continue  # unset if blank
        if not isinstance(text, str):
            raise WebConfigError(f"{where}.headers.{name} must be a string, not {text!r}")
        allowed = HEADERS[name]
        if allowed is not None and text not in allowed:
            raise WebConfigError(f"{where}.headers.{name}: {text!r} is not one of "
                                 f"{', '.join(allowed)}")
        found.append((name, text))
    return tuple(found), http2


def _tls(value: Any, directory: Path) -> TlsConfig | None:
    where = "tls_server_config"
    section = _mapping(value, where, _TLS)

    def text(key: str) -> str:
        return _string(section, key, where)

    def path(key: str) -> str:
        given = text(key)
        return str(directory / given) if given else ""

    cert_file, key_file, ca_file = path("cert_file"), path("key_file"), path("client_ca_file")
    cert, key, ca = text("cert"), text("key"), text("client_ca")
    auth = text("client_auth_type") or "NoClientCert"
    if not (cert_file or key_file or cert or key or ca_file or ca or text("client_auth_type")):
        return None  # no TLS: plain HTTP
    for a, b in (("cert", "cert_file"), ("key", "key_file"), ("client_ca", "client_ca_file")):
        if text(a) and text(b):
            raise WebConfigError(f"{where}: give {a} or {b}, not both")
    if not (cert_file or cert):
        raise WebConfigError(f"{where}: missing one of cert or cert_file")
    if not (key_file or key):
        raise WebConfigError(f"{where}: missing one of key or key_file")
    if auth not in CLIENT_AUTH:
        raise WebConfigError(f"{where}.client_auth_type: unknown {auth!r} (one of "
                             f"{', '.join(CLIENT_AUTH)})")
    mode = CLIENT_AUTH[auth]
    if mode is None:
        raise WebConfigError(f"{where}.client_auth_type {auth} (a certificate that is not "
                             "verified) is not supported: use RequireAndVerifyClientCert")
    has_ca = bool(ca_file or ca)
    if has_ca and mode == ssl.CERT_NONE:
        raise WebConfigError(f"{where}: client CAs are given without a client_auth_type "
                             "that verifies (VerifyClientCertIfGiven, "
                             "RequireAndVerifyClientCert)")
    if mode != ssl.CERT_NONE and not has_ca:
        raise WebConfigError(f"{where}.client_auth_type {auth} needs client_ca_file (or "
                             "client_ca)")
    sans = _strings(section, "client_allowed_sans", where)
    if sans is not None and mode != ssl.CERT_REQUIRED:
        raise WebConfigError(f"{where}.client_allowed_sans needs client_auth_type "
                             "RequireAndVerifyClientCert")
    versions = []
    for key_name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        name = text(key_name) or default
        if name not in TLS_VERSIONS:
            raise WebConfigError(f"{where}.{key_name}: unknown {name!r} (one of "
                                 f"{', '.join(TLS_VERSIONS)})")
        versions.append(TLS_VERSIONS[name])
    if versions[0] > versions[1]:
        raise WebConfigError(f"{where}: min_version is above max_version")
    ciphers = _strings(section, "cipher_suites", where) or ()
    for name in ciphers:
        if name not in CIPHERS:
            raise WebConfigError(f"{where}.cipher_suites: unknown cipher {name!r}")
    curves = _strings(section, "curve_preferences", where) or ()
    for name in curves:
        if name not in CURVES:
            raise WebConfigError(f"{where}.curve_preferences: unknown curve {name!r} (one "
                                 f"of {', '.join(CURVES)})")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.minimum_version, context.maximum_version = versions
    except (ValueError, ssl.SSLError) as exc:
        raise WebConfigError(f"{where}: this OpenSSL refuses the TLS versions: "
                             f"{_reason(exc)}") from None
    try:
        with _pem_files(cert_file, cert, key_file, key) as (cert_path, key_path):
            context.load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise WebConfigError(f"{where}: cannot load the certificate and key "
                             f"({cert_file or 'cert'}, {key_file or 'key'}): "
                             f"{_reason(exc)}") from None
    if has_ca:
        try:
            if ca_file:
                context.load_verify_locations(cafile=ca_file)
            else:
                context.load_verify_locations(cadata=ca)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise WebConfigError(f"{where}: cannot load the client CAs "
                                 f"({ca_file or 'client_ca'}): {_reason(exc)}") from None
    context.verify_mode = mode
    suites = [CIPHERS[name] for name in ciphers if CIPHERS[name]]
    if suites:
        try:
            context.set_ciphers(":".join(s for s in suites if s))
        except ssl.SSLError as exc:
            raise WebConfigError(f"{where}.cipher_suites: {_reason(exc)}") from None
    if _bool(section, "prefer_server_cipher_suites", where, True):
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    if curves:
        # Python's ssl sets one curve: the first preferred one
        context.set_ecdh_curve(CURVES[curves[0]])
    return TlsConfig(context=context, client_auth=auth, allowed_sans=sans or ())


@contextlib.contextmanager
def _pem_files(cert_file: str, cert: str, key_file: str, key: str
               ) -> Iterator[tuple[str, str]]:
    """The certificate and key as files (inline PEM text goes to a private temporary
    directory, removed at once: Python's ssl loads a chain from files only)."""
    if cert_file and key_file:
        yield cert_file, key_file
        return
    with tempfile.TemporaryDirectory(prefix="qmf-exporter-tls-") as tmp:
        paths = []
        for given, inline, name in ((cert_file, cert, "cert.pem"), (key_file, key, "key.pem")):
            if given:
                paths.append(given)
                continue
            target = Path(tmp) / name
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(inline)
            paths.append(str(target))
        yield paths[0], paths[1]
