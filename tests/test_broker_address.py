"""``broker_url``: the broker addresses the classic qpid tools take, as URLs."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmf_async.errors import UsageError
from qmf_async.transport import broker_url, parse_url


@pytest.mark.parametrize(
    ("text", "scheme", "host", "port", "user"),
    [
        ("localhost", "amqp", "localhost", 5672, "guest"),
        ("127.0.0.1:5673", "amqp", "127.0.0.1", 5673, "guest"),
        ("admin@broker.example:5673", "amqp", "broker.example", 5673, "admin"),
        ("admin/secret@broker.example:5673", "amqp", "broker.example", 5673, "admin"),
        ("admin:secret@broker.example", "amqp", "broker.example", 5672, "admin"),
        ("[::1]:5673", "amqp", "::1", 5673, "guest"),
        ("me/pw@[fe80::1]", "amqp", "fe80::1", 5672, "me"),
        ("amqp://me/pw@host:7", "amqp", "host", 7, "me"),
        ("amqps://me/pw@host", "amqps", "host", 5671, "me"),
    ],
)
def test_qpid_forms(text: str, scheme: str, host: str, port: int, user: str) -> None:
    address = parse_url(broker_url(text))
    assert (address.scheme, address.host, address.port, address.user) == (
        scheme,
        host,
        port,
        user,
    )


@pytest.mark.parametrize(
    "url",
    [
        "amqp://guest:guest@localhost:5672/",
        "amqps://host",
        "amqp://u%40x:p%2Fw@host:5673/my%2Fvhost",
        "AMQP://host:1/v",
    ],
)
def test_urls_come_back_unchanged(url: str) -> None:
    assert broker_url(url) == url


def test_default_port() -> None:
    assert parse_url(broker_url("host", default_port=5673)).port == 5673
    assert parse_url(broker_url("host:5674", default_port=5673)).port == 5674


def test_password_is_percent_encoded() -> None:
    url = broker_url("u/p@ss:w/rd%20@host:5673")
    assert urlsplit(url).password == "p%40ss%3Aw%2Frd%2520"
    assert unquote(urlsplit(url).password or "") == "p@ss:w/rd%20"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("host:0", "1-65535"),
        ("host:65536", "1-65535"),
        ("host:", "1-65535"),
        ("host:abc", "is not [user[/password]@]host[:port]"),
        ("::1", "brackets"),
        ("fe80::1:5672", "brackets"),
        ("[::1", "is not"),
        ("host/vhost", "is not"),
        ("/pw@host", "user before '@' is empty"),
        ("user/pw@", "is not"),
        ("ftp://host", "scheme 'ftp'"),
        ("amqp:tcp:host:5672", "amqp:tcp:host:port form is not supported"),
        ("amqp://", "has no host"),
    ],
)
def test_bad_addresses(text: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=None) as info:
        broker_url(text)
    assert fragment in str(info.value)


def test_errors_hide_the_password() -> None:
    for text in ("me/topsecret@host:0", "me:topsecret@", "amqp://me/topsecret@host/x"):
        with pytest.raises(UsageError) as info:
            broker_url(text)
        assert "topsecret" not in str(info.value)


def test_not_a_string() -> None:
    with pytest.raises(UsageError, match="must be a str"):
        broker_url(5672)  # type: ignore[arg-type]


def test_parse_url_points_at_the_qpid_form() -> None:
    with pytest.raises(UsageError, match=r"-b user/password@host:port"):
        parse_url("amqp://me/pw@host:5672")


# A user has no '/' or ':' (the qpid form splits user and password at the first one);
# anything else, '@' included, survives.
_users = st.text(
    st.characters(codec="utf-8", exclude_characters="/:"), min_size=1
).filter(lambda u: u.strip() == u)
_passwords = st.text(st.characters(codec="utf-8"))
_hosts = st.sampled_from(["localhost", "127.0.0.1", "broker-1.example.org", "[::1]", "[fe80::2]"])


@given(
    user=_users,
    password=_passwords,
    host=_hosts,
    port=st.integers(1, 65535),
    sep=st.sampled_from("/:"),
)
def test_credentials_round_trip(user: str, password: str, host: str, port: int, sep: str) -> None:
    text = f"{user}{sep}{password}@{host}:{port}"
    if text.strip() != text:
        return  # broker_url strips surrounding blanks, as a shell argument would lose them
    url = broker_url(text)
    address = parse_url(url)
    assert address.host == host.strip("[]")
    assert address.port == port
    assert address.user == user
    assert unquote(urlsplit(url).password or "") == password


_FORMS = ["{u}{s}{p}@{h}", "amqp://{u}{s}{p}@{h}/", "amqps://{u}{s}{q}@{h}:5671/v"]


@given(user=_users, password=_passwords, host=_hosts, form=st.sampled_from(_FORMS),
       sep=st.sampled_from("/:"))
def test_censor_url_hides_the_password_in_every_form(user: str, password: str, host: str,
                                                     form: str, sep: str) -> None:
    """Whatever the password (percent-encoded or not), the censored address is the
    scheme, the user and ``******`` before the last ``@``, then the rest unchanged."""
    from urllib.parse import quote

    from qmf_async.transport._base import censor_url
    text = form.format(u=user, s=sep, p=password, q=quote(password, safe=""), h=host)
    scheme = form.partition("{u}")[0]
    assert censor_url(text) == f"{scheme}{user}{sep}******@{text.rpartition('@')[2]}"
