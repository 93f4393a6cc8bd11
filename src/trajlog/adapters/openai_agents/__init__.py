"""trajlog as the store of an OpenAI Agents SDK session.

``TrajlogSession`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``,
``clear_session``) on a trajlog log, plus branching in the style of the SDK's
``AdvancedSQLiteSession``, where a branch is a trajlog fork::

    from agents import Agent, Runner
    from trajlog.adapters.openai_agents import TrajlogSession

    session = TrajlogSession("user-42", "trajlog.db")
    await Runner.run(agent, "hi", session=session)

Each SDK item is one event of the type trajlog's projections, recovery and
views know: a user message is ``user/message``, an assistant message
``assistant/message`` (its content kept as the SDK's list), a
``function_call`` an ``assistant/message`` requesting that call, a
``function_call_output`` a ``tool/result`` (after a ``tool/call`` marked
``implied``: the SDK does not record when a tool starts), a ``reasoning``
item an ``assistant/message`` with ``reasoning``; any other item is carried
as ``agents/item``.  The fields the trajlog shape does not hold stay under
``"sdk"``, so ``get_items`` returns items equal to those added.  The log stays
append-only: ``pop_item`` appends ``history/pop {target}``, ``clear_session``
``history/clear {through}``, and reads honour both.
"""

from __future__ import annotations

from .sdk_session import MAIN, NAMESPACE, TrajlogSession

__all__ = ["MAIN", "NAMESPACE", "TrajlogSession"]
