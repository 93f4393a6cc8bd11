"""One module per source format.  Each defines

* ``NAME`` -- the format's name (``import_path(format=NAME)``);
* ``sniff(path: pathlib.Path) -> bool`` -- whether ``path`` (a file or a
  folder) is in this format, from its name and its first bytes only;
* ``read(path: pathlib.Path, notes: Notes) -> Iterator[MappedSession]`` -- the
  sessions it holds, parents before their children, each session's events
  lazily; every record that gives no event is written to ``notes`` with why.

:data:`trajlog.interop.formats.FORMATS` is the order in which ``format="auto"`` asks them.
"""
