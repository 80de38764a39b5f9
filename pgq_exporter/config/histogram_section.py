"""The `histograms:` section: the classic buckets of the job histograms, by layout
name or as explicit bounds, and whether protobuf scrapes get them too."""

from __future__ import annotations

from pgq_exporter.config.checks import Checks
from pgq_exporter.config.model import HistogramSettings
from pgq_exporter.histograms import CLASSIC_LAYOUTS, ClassicLayout, explicit_layout

# Explicit bounds: a histogram of more buckets than this is no longer cheap.
MAX_EXPLICIT_BOUNDS = 200
# Each wait threshold is two series a queue.
MAX_WAIT_THRESHOLDS = 8
WAIT_THRESHOLD_RANGE = (0.001, 7 * 86400.0)


class HistogramSection(Checks):
    def histograms(self) -> HistogramSettings:
        keys = ("classic", "classic_in_protobuf", "wait_thresholds")
        entry = self.mapping(("histograms",), keys)
        default = HistogramSettings()
        return HistogramSettings(
            classic=self.classic_layout() if "classic" in entry else default.classic,
            classic_in_protobuf=(
                self.boolean(("histograms", "classic_in_protobuf"))
                if "classic_in_protobuf" in entry
                else default.classic_in_protobuf
            ),
            wait_thresholds=(
                self.wait_thresholds() if "wait_thresholds" in entry else default.wait_thresholds
            ),
        )

    def wait_thresholds(self) -> tuple[float, ...]:
        path = ("histograms", "wait_thresholds")
        count = len(self.sequence(path))
        if count > MAX_WAIT_THRESHOLDS:
            raise self.fail(path, f"expected at most {MAX_WAIT_THRESHOLDS} thresholds, got {count}")
        seconds = tuple(self.duration((*path, i), WAIT_THRESHOLD_RANGE) for i in range(count))
        for i in range(1, count):
            if seconds[i] <= seconds[i - 1]:
                raise self.fail((*path, i), "thresholds must increase")
        return seconds

    def classic_layout(self) -> ClassicLayout:
        path = ("histograms", "classic")
        value = self.get(path)
        if isinstance(value, str):
            layout = CLASSIC_LAYOUTS.get(value)
            if layout is None:
                raise self.fail(path, f"unknown layout {value!r}; expected one of "
                                f"{', '.join(CLASSIC_LAYOUTS)} or a list of bounds")  # fmt: skip
            return layout
        if not isinstance(value, list):
            raise self.fail(path, "expected a layout name or a list of bounds in seconds")
        if not 1 <= len(value) <= MAX_EXPLICIT_BOUNDS:
            raise self.fail(path, f"expected 1 to {MAX_EXPLICIT_BOUNDS} bounds, got {len(value)}")
        bounds = tuple(self.number((*path, i), minimum=1e-9) for i in range(len(value)))
        for i in range(1, len(bounds)):
            if bounds[i] <= bounds[i - 1]:
                raise self.fail((*path, i), "bounds must increase")
        return explicit_layout(bounds)
