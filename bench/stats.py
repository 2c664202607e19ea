"""Summaries of interleaved samples and the issue's targets, as plain data.

Figures are compared as ratios of samples taken side by side (sample i of the host and
sample i of its baseline come from the same round), so drift of a shared, noisy machine
cancels; the spread is the interquartile range.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, NamedTuple


class Summary(NamedTuple):
    """p50 and the interquartile range of some samples."""

    p50: float
    p25: float
    p75: float
    count: int

    @classmethod
    def single(cls, value: float) -> Summary:
        """One measurement (a size): no spread."""
        return cls(value, value, value, 1)

    def as_dict(self) -> dict[str, float]:
        return {"p50": self.p50, "p25": self.p25, "p75": self.p75, "n": self.count}


def summarize(samples: Sequence[float]) -> Summary:
    """p50 and quartiles (inclusive method: with few runs the extremes stay in range)."""
    if not samples:
        raise ValueError("no samples")
    if len(samples) == 1:
        return Summary.single(float(samples[0]))
    q1, q2, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Summary(q2, q1, q3, len(samples))


def paired_ratios(values: Sequence[float], baselines: Sequence[float]) -> list[float]:
    """value_i / baseline_i for samples taken in the same round."""
    return [v / b for v, b in zip(values, baselines, strict=True) if b > 0]


def fmt(summary: dict[str, float], suffix: str = "") -> str:
    """p50 [p25-p75]; a single measurement (a size) without its non-spread."""
    p50, p25, p75 = summary["p50"], summary["p25"], summary["p75"]
    if summary["n"] == 1:
        return f"{p50:.3g}{suffix}"
    return f"{p50:.3g}{suffix} [{p25:.3g}-{p75:.3g}]"


class Target(NamedTuple):
    """An upper bound from the issue, on a ratio or on an absolute figure."""

    limit: float
    unit: str
    """"x" for a ratio, otherwise the unit of the absolute figure ("us", "ms", "MiB")."""

    def describe(self) -> str:
        return f"<= {self.limit:g}{'x' if self.unit == 'x' else ' ' + self.unit}"


def verdict(value: float, target: Target, baseline: float | None = None, unit: str = "") -> str:
    """ "met", or how far off: the excess, and the cut needed to reach the limit.

    For a ratio target with a known baseline, the cut is also given in the figure's own
    unit (e.g. milliseconds of start-up to remove).
    """
    if value <= target.limit:
        return "met"
    cut = 1 - target.limit / value
    if target.unit == "x":
        text = f"MISSED by {value / target.limit:.2f}x (needs -{cut:.0%}"
        if baseline is not None:
            text += f", about -{(value - target.limit) * baseline:.3g} {unit}".rstrip()
        return text + ")"
    return f"MISSED by {value - target.limit:.3g} {target.unit} (needs -{cut:.0%})"


def row(
    label: str,
    value: Summary,
    unit: str,
    baseline: Summary | None = None,
    ratio: Summary | None = None,
    target: Target | None = None,
) -> dict[str, Any]:
    """One printed/JSON line: the figure, its baseline, their paired ratio, the target."""
    checked = None
    if target is not None:
        figure = ratio.p50 if target.unit == "x" and ratio is not None else value.p50
        base = baseline.p50 if target.unit == "x" and baseline is not None else None
        checked = verdict(figure, target, base, unit)
    return {
        "label": label,
        "unit": unit,
        "value": value.as_dict(),
        "baseline": baseline.as_dict() if baseline else None,
        "ratio": ratio.as_dict() if ratio else None,
        "target": target.describe() if target else None,
        "verdict": checked,
    }
