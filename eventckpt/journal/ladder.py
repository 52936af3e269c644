"""The schema ladder's files: numbered SQL files shipped in the wheel, one folder per engine."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

_SCHEMA_FILE = re.compile(r"(\d{3})_[a-z0-9_]+\.sql\Z")


def _schema_dir(*folder: str) -> Any:
    packaged = resources.files("eventckpt") / "schema"
    for name in folder:  # one step at a time: Python 3.10's Traversable takes one name per join
        packaged = packaged / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2].joinpath("schema", *folder)  # a source checkout


def ladder_files(*folder: str) -> list[tuple[int, str, str]]:
    """(number, name, sql) of every schema file in `schema/<folder>`, in ladder order: numbers start at 1
    and are unique.

    Numbers are handed out per feature branch, so a branch may lack a rung another branch adds; the
    schema version is the highest number, and a store applies every rung above the one it records.
    """
    found = []
    for entry in _schema_dir(*folder).iterdir():
        m = _SCHEMA_FILE.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _, _ in found]
    if not numbers or numbers[0] != 1 or len(set(numbers)) != len(numbers):
        raise RuntimeError(f"schema files must start at 001 and be numbered uniquely: {[name for _, name, _ in found]}")
    return found
