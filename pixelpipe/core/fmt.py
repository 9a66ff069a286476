"""Human-readable numbers for the reports, the plan and the benchmark tables (one place, no heavy imports)."""

from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    """Bytes in binary units ('-' for unknown)."""
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def fmt_seconds(s: float | None) -> str:
    """Seconds with one decimal ('-' for unknown)."""
    return "-" if s is None else f"{s:.1f} s"


def fmt_pct(e: float | None) -> str:
    """A signed percentage, e.g. a prediction error ('-' for unknown)."""
    return "-" if e is None else f"{e:+.1f} %"
