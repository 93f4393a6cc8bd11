"""In and out: exports (``.tlog``, ``.jsonl`` / ``.jsonl.zst``, ``.zip``) and
importers from trajlog exports and from other agents' session files.

:mod:`.mapping` -- what importers produce; :mod:`.sources` -- one module per
source format; :mod:`.importer` -- writing mapped sessions into a store;
:mod:`.export` -- the export formats.
"""
