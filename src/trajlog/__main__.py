"""``python -m trajlog``: the command-line interface (see :mod:`trajlog.cli`)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
