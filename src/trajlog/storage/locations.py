"""Where a store lives, as text: a file path or a server URL, and how it is
printed (never with a password).  No driver is imported here."""

from __future__ import annotations

import re

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server(location: str) -> bool:
    """True when ``location`` is a server URL rather than a file path."""
    return location.lower().startswith(SERVER_SCHEMES)


def redact(location: str) -> str:
    """``location`` safe to print: a URL or libpq ``key=value`` string
    without its password (a file path as it is)."""
    if not is_server(location) and "password" not in location:
        return location
    url = re.sub(r"(://[^:/@?#,]*):[^@/?#]*@", r"\1@", location)
    url = re.sub(r"([?&])password=[^&]*(&|$)", lambda m: m.group(1) if m.group(2) else "", url)
    url = re.sub(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", "password=***", url)
    return url.rstrip("?&")


__all__ = ["SERVER_SCHEMES", "is_server", "redact"]
