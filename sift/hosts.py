"""Which ``Host`` names sift's HTTP servers answer (``sift web`` and ``sift worker --web``).

Bound to a loopback address, a server answers ``localhost``, IP addresses and the names of
``SIFT_WEB_ALLOWED_HOSTS`` only: a site whose name an attacker rebinds to 127.0.0.1 (DNS
rebinding) would otherwise be same-origin with it in a browser on the same machine and
read what it serves (forty-ninth session).
"""

from __future__ import annotations

import contextlib
import ipaddress

from sift.settings import Settings


def loopback(host: str) -> bool:
    """Whether ``host`` (``SIFT_WEB_HOST``) is a loopback address or ``localhost``.

    >>> loopback("127.0.0.1"), loopback("::1"), loopback("0.0.0.0"), loopback("example.org")
    (True, True, False, False)
    """
    try:
        return host.lower() == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_refused(header: str | None, settings: Settings) -> str | None:
    """The name in a ``Host`` header the server must not answer, or ``None``.

    Bound to a loopback address (``settings.web_host``), only ``localhost``, IP addresses
    and ``settings.web_allowed_hosts`` are answered; bound to another address, only a list
    given there is kept (``*``: any name). A request without ``Host`` (HTTP/1.0) comes
    from no browser.

    >>> s = Settings()
    >>> host_refused("evil.example:6066", s), host_refused("localhost:6066", s)
    ('evil.example', None)
    >>> host_refused("[::1]:6066", s), host_refused("evil.example", Settings(web_host="0.0.0.0"))
    (None, None)
    """
    allowed = settings.allowed_hosts()
    if not header or "*" in allowed or not (allowed or loopback(settings.web_host)):
        return None
    name = header.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in allowed or name == "localhost":
        return None
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(name)
        return None
    return name


def refusal(name: str) -> str:
    """The one-line error for a refused ``Host`` (``name`` clipped by the caller)."""
    return (f"host {name!r} is not served here (on a loopback address sift answers "
            f"localhost and IP addresses: list other names in SIFT_WEB_ALLOWED_HOSTS)")
