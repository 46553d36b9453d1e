"""Tokens and cost added up per day, per workflow and per repository, without I/O.

The store adds up the runs per (day, repository, workflow) (`Usage`, a few rows however many
runs there were); these functions fold those into the page's totals. Days are UTC days
numbered from the epoch (`int(ts // 86400)`); the caller names them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DAY = 86400


@dataclass(frozen=True, slots=True)
class RunCost:
    run_id: str
    repo: str
    workflow: str
    at: float
    """When the run ended (or began, when it has not ended), seconds since the epoch."""
    input_tokens: int
    output_tokens: int
    cost: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Usage:
    """The runs of one day, repository and workflow, added up."""

    day: int
    repo: str
    workflow: str
    runs: int
    input_tokens: int
    output_tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class Total:
    key: str
    """A day number as text, a workflow or a repository."""
    runs: int
    input_tokens: int
    output_tokens: int
    cost: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def day_of(ts: float) -> int:
    return int(ts // DAY)


def _add(into: dict[str, list[float]], key: str, row: Usage) -> None:
    acc = into.setdefault(key, [0, 0, 0, 0.0])
    acc[0] += row.runs
    acc[1] += row.input_tokens
    acc[2] += row.output_tokens
    acc[3] += row.cost


def _total(key: str, acc: Sequence[float]) -> Total:
    return Total(
        key=key, runs=int(acc[0]), input_tokens=int(acc[1]), output_tokens=int(acc[2]), cost=acc[3]
    )


def per_day(rows: Iterable[Usage], first_day: int, days: int) -> list[Total]:
    """One total per day from `first_day`, `days` of them, empty days included; rows outside
    the period are left out."""
    sums: dict[str, list[float]] = {}
    for row in rows:
        if first_day <= row.day < first_day + days:
            _add(sums, str(row.day), row)
    return [
        _total(str(day), sums.get(str(day), [0, 0, 0, 0.0]))
        for day in range(first_day, first_day + days)
    ]


def per_key(rows: Iterable[Usage], key: str) -> list[Total]:
    """Totals per `key` ('workflow' or 'repo'), costliest first (then most tokens, then name)."""
    if key not in ("workflow", "repo"):
        raise ValueError(f"cannot add up costs per {key!r}")
    sums: dict[str, list[float]] = {}
    for row in rows:
        _add(sums, row.workflow if key == "workflow" else row.repo, row)
    totals = [_total(name, acc) for name, acc in sums.items()]
    return sorted(totals, key=lambda t: (-t.cost, -t.tokens, t.key))


def stacks(
    rows: Iterable[Usage], first_day: int, days: int, *, key: str, measure: str
) -> tuple[list[str], list[list[float]]]:
    """The chart's series: the names of `key` ('workflow' or 'repo'), largest first, and per
    day from `first_day` the value of `measure` ('cost' or 'tokens') of each, in that order."""
    if key not in ("workflow", "repo") or measure not in ("cost", "tokens"):
        raise ValueError(f"cannot chart {measure!r} per {key!r}")
    cells: dict[tuple[int, str], float] = {}
    sizes: dict[str, float] = {}
    for row in rows:
        if not first_day <= row.day < first_day + days:
            continue
        name = row.workflow if key == "workflow" else row.repo
        value = row.cost if measure == "cost" else float(row.input_tokens + row.output_tokens)
        cells[(row.day, name)] = cells.get((row.day, name), 0.0) + value
        sizes[name] = sizes.get(name, 0.0) + value
    names = sorted(sizes, key=lambda n: (-sizes[n], n))
    values = [
        [cells.get((day, name), 0.0) for name in names]
        for day in range(first_day, first_day + days)
    ]
    return names, values
