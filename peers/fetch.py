"""Unpack a peer's source distribution (its sdist ships the tests its wheel
leaves out) into ``build/peers/``, fetched once from the package index.

    python peers/fetch.py openai-agents==0.24.0   # prints the unpacked tree
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "peers"


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Unpack ``tar`` into ``dest`` and nowhere else: tarfile's "data" filter
    where the interpreter has it (3.11.4+, 3.10.12+), else the same rule by
    hand -- files, folders and links only, every path and link target inside
    ``dest``."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = dest.resolve()
    members = tar.getmembers()
    for member in members:
        target = (dest / member.name).resolve()
        inside = target.is_relative_to(root)
        if member.issym():   # a link inside the tree (an sdist's CLAUDE.md -> AGENTS.md)
            inside = inside and (target.parent / member.linkname).resolve().is_relative_to(root)
        elif member.islnk():
            inside = inside and (dest / member.linkname).resolve().is_relative_to(root)
        elif not (member.isfile() or member.isdir()):
            inside = False
        if not inside:
            raise SystemExit(f"{tar.name}: refusing {member.name!r} (not a file or a link "
                             f"inside {dest})")
    tar.extractall(dest, members=members)  # every member checked above


def sdist_tree(requirement: str) -> Path:
    """The unpacked sdist of ``name==version`` (downloaded on first use)."""
    name, _, version = requirement.partition("==")
    if not version:
        raise SystemExit(f"pin the version: {requirement!r} (name==version)")
    stem = f"{name.replace('-', '_')}-{version}"
    tree = CACHE / stem
    if (tree / "PKG-INFO").exists():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"{stem}.tar.gz"
    if not archive.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", "--dest", str(CACHE), requirement], check=True)
    with tarfile.open(archive) as tar:
        _extract(tar, CACHE)
    if not (tree / "PKG-INFO").exists():
        raise SystemExit(f"{archive} did not unpack to {tree}")
    return tree


if __name__ == "__main__":
    for req in sys.argv[1:]:
        print(sdist_tree(req))
