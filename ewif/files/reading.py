"""Reading the project's files: JSON, or YAML by suffix, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_data(path: str | Path, what: str) -> Any:
    """The parsed content of a JSON (or, by suffix, YAML) file; one-line ``ValueError``
    naming ``what`` (e.g. "model-set file") if it cannot be read or parsed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {what} {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}): not a {what}") from None
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ValueError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to be a {what}") from None
