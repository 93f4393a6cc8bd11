"""The ``trajlog`` command line (:mod:`.main`) and its demo (:mod:`.demo`)."""

from __future__ import annotations

from .demo import demo, record_demo_session
from .main import main

__all__ = ["demo", "main", "record_demo_session"]
