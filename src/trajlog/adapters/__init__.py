"""Adapters: trajlog behind the storage interfaces agent hosts already use.

Each adapter lives in its own module, imports its peer lazily (the module
itself imports the peer; importing :mod:`trajlog` never does) and is installed
with its extra:

* :mod:`.openai_agents` -- ``TrajlogSession``, the OpenAI Agents SDK
  ``Session`` protocol (``pip install 'trajlog[agents]'``);
* :mod:`.langgraph` -- ``TrajlogSaver`` (a ``BaseCheckpointSaver``) and
  ``TrajlogStore`` (a ``BaseStore``) (``pip install 'trajlog[langgraph]'``);
* :mod:`.eventsourcing` -- recorders for the eventsourcing library
  (``pip install 'trajlog[eventsourcing]'``).

The adapters use trajlog's public API only.
"""
