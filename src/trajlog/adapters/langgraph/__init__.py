"""trajlog behind LangGraph's storage interfaces (``pip install 'trajlog[langgraph]'``).

* :class:`TrajlogSaver` -- a ``BaseCheckpointSaver`` (sync and async): each thread
  is a trajlog session, each checkpoint and each task's writes an event
  (:mod:`.saver`);
* :class:`TrajlogStore` -- a ``BaseStore`` over trajlog's memory layer (:mod:`.base_store`).

Importing this package imports LangGraph; ``import trajlog`` never does.
"""

from __future__ import annotations

from .base_store import TrajlogStore
from .saver import TrajlogSaver

__all__ = ["TrajlogSaver", "TrajlogStore"]
