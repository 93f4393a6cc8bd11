"""The store's search face: search across sessions and its derived index
(the logic is in :mod:`.session_search`; this mixin keeps
:class:`~trajlog.api.store.Store` small)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .session_search import Searcher, SearchResult


class SearchFace:
    """Search methods of :class:`~trajlog.api.store.Store`."""

    _search: Searcher

    _check_open: Callable[[], None]   # (Store's: raises once the store is closed)

    def search(self, query: str, *, limit: int = 20, sessions: Iterable[str] | None = None,
               tenant: str | None = None, user: str | None = None, cwd: str | None = None,
               since_ms: int | None = None, until_ms: int | None = None,
               types: Iterable[str] | None = None, branch: str | None = None,
               data_class: str | None = None, catch_up: bool = True,
               marks: tuple[str, str] = ("[", "]")) -> SearchResult:
        """Search the text of every session's events (messages, tool calls
        and results, summaries) for every word of ``query``: ranked hits,
        best first, each with its session, seq, a snippet (matched words
        between ``marks``) and links for the CLI and the viewer.  The filters
        (sessions, the header's ``tenant``/``user``, cwd, event time, type --
        ``"tool/"`` a family --, branch, data class) are applied in the query,
        before the rank.  First catches the derived index up to the committed
        heads (``catch_up=False``: search what is indexed); the result's
        ``as_of_ms`` says up to when.  See docs/search.md."""
        self._check_open()
        return self._search.search(
            query, limit=limit, sessions=None if sessions is None else list(sessions),
            tenant=tenant, user=user, cwd=cwd, since_ms=since_ms, until_ms=until_ms,
            types=None if types is None else list(types), branch=branch,
            data_class=data_class, catch_up=catch_up, marks=marks)

    def update_search_index(self) -> int:
        """Catch the derived search index up to the committed heads (a host
        calls it at turn end, off the append's path); how many events it
        indexed."""
        self._check_open()
        return self._search.update()[0]

    def search_indexer(self, interval_s: float | None = 1.0) -> None:
        """Start (or, with None, stop) a background thread that catches the
        search index up every ``interval_s`` seconds; off by default, stopped
        by :meth:`close`."""
        self._check_open()
        self._search.background(interval_s)

    def rebuild_search_index(self) -> int:
        """Drop the derived search index and make it again from the logs;
        how many events it holds."""
        self._check_open()
        return self._search.rebuild()

    def drop_search_index(self) -> None:
        """Drop the derived search index (the next search makes it again)."""
        self._check_open()
        self._search.drop()


__all__ = ["SearchFace"]
