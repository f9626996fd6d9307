"""Normalising the URLs users give (``localhost:8000``, ``http://host/prefix/``, ``ws://...``)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

__all__ = ["http_url", "is_loopback", "ws_url"]


def http_url(base_url: str) -> str:
    """The server's HTTP base URL: scheme ``http``/``https``, no trailing slash, no query.

    Example:
        >>> http_url("localhost:8000/")
        'http://localhost:8000'
        >>> http_url("wss://example.org/env")
        'https://example.org/env'
    """
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError(f"base_url must be a URL such as 'http://127.0.0.1:8000', got {base_url!r}")
    text = base_url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https"):
        raise ValueError(f"base_url must use http, https, ws or wss, got {base_url!r}")
    if not parts.hostname:
        raise ValueError(f"base_url has no host: {base_url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/ws"):
        path = path[: -len("/ws")]
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def ws_url(base_url: str, query: str = "", route: str = "/ws") -> str:
    """The WebSocket endpoint (``/ws``, or another ``route``) of the server at ``base_url``.

    Example:
        >>> ws_url("https://example.org/env")
        'wss://example.org/env/ws'
    """
    parts = urlsplit(http_url(base_url))
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path + route, query, ""))


def is_loopback(base_url: str) -> bool:
    """Whether the URL points at this machine (then proxies from the environment are ignored)."""
    host = urlsplit(http_url(base_url)).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
