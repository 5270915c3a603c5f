"""Files shipped with interlock (hardware presets, JSON Schemas, example aliases).

In a wheel they live under ``interlock/_data/``; in a checkout (or an editable install) they are the
top-level folders of the repository. Both are looked up the same way.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


def data_dir(name: str) -> Path:
    """``profiles``, ``schema`` or ``aliases``: the packaged copy, else the checkout's."""
    packaged = _PACKAGE / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parent / name


def builtin_profiles() -> dict[str, Path]:
    """Preset name -> file, e.g. ``rtx4090`` -> ``profiles/rtx4090.yaml``."""
    folder = data_dir("profiles")
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}
