"""A target's jobs on the scheduler: its setup, each group of its collectors, and a
render put off (see Target._render_soon)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class JobsOf(Protocol):
    """What the jobs run of their target."""

    @property
    def stopped(self) -> bool: ...

    def setup(self) -> float | None: ...

    def render_if_due(self) -> None: ...

    def run_group(self, index: int, now: float, late: float) -> float | None: ...


@dataclass(eq=False)
class SetupJob:
    target: JobsOf

    @property
    def cancelled(self) -> bool:
        return self.target.stopped

    def run(self, now: float, late: float) -> float | None:
        return self.target.setup()


@dataclass(eq=False)
class RenderJob:
    target: JobsOf

    @property
    def cancelled(self) -> bool:
        return self.target.stopped

    def run(self, now: float, late: float) -> float | None:
        self.target.render_if_due()
        return None


@dataclass(eq=False)
class GroupJob:
    target: JobsOf
    index: int
    replaced: bool = False  # by a job due sooner

    @property
    def cancelled(self) -> bool:
        return self.target.stopped or self.replaced

    def run(self, now: float, late: float) -> float | None:
        return self.target.run_group(self.index, now, late)
