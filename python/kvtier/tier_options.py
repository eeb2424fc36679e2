"""Checks of a tier's options as an engine passes them (vLLM's factory: keyword
arguments from the tier's JSON block; SGLang: its backend's extra config): a
bad option is an error that names it."""

from __future__ import annotations

from typing import Any


class TierOptionError(ValueError):
    """An option of a kvtier tier in an engine's configuration is wrong."""


def refuse_unknown(tier: str, unknown: dict[str, Any], known: list[str]) -> None:
    if unknown:
        raise TierOptionError(
            f"{tier}: unknown option(s) {', '.join(sorted(unknown))}; it takes {', '.join(sorted(known))}"
        )


def positive_int(tier: str, name: str, value: Any, *, most: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TierOptionError(f"{tier}: option {name} must be a positive integer, not {value!r}")
    if most is not None and value > most:
        raise TierOptionError(f"{tier}: option {name} is at most {most}, not {value}")
    return value


def flag(tier: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TierOptionError(f"{tier}: option {name} must be true or false, not {value!r}")
    return value


def text(tier: str, name: str, value: Any, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise TierOptionError(f"{tier}: option {name} must be a non-empty string, not {value!r}")
    return value
