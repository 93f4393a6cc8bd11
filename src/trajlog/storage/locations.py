"""Where a store lives, as text: a file path or a server URL, and how it is
printed (never with a password).  No driver is imported here."""

from __future__ import annotations

import re

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server(location: str) -> bool:
    """True when ``location`` is a server URL rather than a file path."""
    return location.lower().startswith(SERVER_SCHEMES)


def redact(location: str) -> str:
    """``location`` safe to print: the password of a URL (its authority, a
    ``password=`` parameter) or of a libpq ``key=value`` string shown as
    ``***``; a file path as it is."""
    if not is_server(location) and "password" not in location:
        return location
    shown = re.sub(r"^([a-z]+://[^:@/?#,]*):[^@/?#]*@", r"\1:***@", location, flags=re.I)
    return re.sub(r"(?i)\bpassword\s*=\s*('(?:[^'\\]|\\.)*'|[^\s&]+)", "password=***",
                  shown)


__all__ = ["SERVER_SCHEMES", "is_server", "redact"]
