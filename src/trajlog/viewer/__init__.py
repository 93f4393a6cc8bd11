"""The static HTML viewer: one self-contained page per session tree.

``render_html(store, session_id)`` gives the page as a string;
``write_html(store, session_id, path)`` writes it atomically and returns a
:class:`ViewReport`.  :mod:`.document` builds the embedded data (every event
once, views referring to events by seq), :mod:`.page` assembles the page from
the assets in ``assets/`` (``viewer.html``, ``viewer.css``, and the script in
three parts: ``data.js``, ``views.js``, ``shell.js``).
"""

from __future__ import annotations

from .document import build_document
from .page import ViewReport, render_html, write_html

__all__ = ["ViewReport", "build_document", "render_html", "write_html"]
