"""OpenTelemetry's SDK, in memory: what django-eid records, read back by the tests.

The global providers can be set once per process, so the SDK's are set once per worker
(:func:`otel_sdk`); :func:`otel` gives each test only what it recorded: the span exporter is
emptied and the metrics are read with delta temporality, from a collection at its start.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@dataclass
class Point:
    """One data point: its metric, attributes and value (a histogram's: its count)."""

    metric: str
    attributes: dict[str, Any]
    value: float
    sum: float | None = None


@dataclass
class Recorded:
    """What django-eid recorded during one test."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    collected: list[Point] = field(default_factory=list)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def points(self, metric: str | None = None, **attributes: Any) -> list[Point]:
        """The data points since the test began (of ``metric``, with ``attributes``:
        ``eid_outcome`` for ``eid.outcome``)."""
        self.collect()
        wanted = {name.replace("_", "."): value for name, value in attributes.items()}
        return [
            p
            for p in self.collected
            if (metric is None or p.metric == metric)
            and all(p.attributes.get(k) == v for k, v in wanted.items())
        ]

    def total(self, metric: str, **attributes: Any) -> float:
        return sum(p.value for p in self.points(metric, **attributes))

    def collect(self) -> None:
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for dp in metric.data.data_points:
                        value = getattr(dp, "value", None)
                        if value is None:  # a histogram's point
                            self.collected.append(
                                Point(metric.name, dict(dp.attributes or {}), dp.count, dp.sum)
                            )
                        else:
                            self.collected.append(
                                Point(metric.name, dict(dp.attributes or {}), value)
                            )


@pytest.fixture(scope="session")
def otel_sdk() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The SDK's providers, in memory, as this worker's global ones (set once)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import (
        Counter,
        Histogram,
        MeterProvider,
        ObservableCounter,
        ObservableGauge,
        ObservableUpDownCounter,
        UpDownCounter,
    )
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    delta = AggregationTemporality.DELTA
    reader = InMemoryMetricReader(
        preferred_temporality={
            kind: delta
            for kind in (
                Counter,
                Histogram,
                UpDownCounter,
                ObservableCounter,
                ObservableGauge,
                ObservableUpDownCounter,
            )
        }
    )
    meter_provider = MeterProvider(metric_readers=[reader])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    # Refused when another set them first: then this suite would read nothing.
    assert trace.get_tracer_provider() is tracer_provider
    assert metrics.get_meter_provider() is meter_provider
    return exporter, reader


@pytest.fixture
def otel(otel_sdk: tuple[InMemorySpanExporter, InMemoryMetricReader]) -> Iterator[Recorded]:
    """What django-eid records during this test: ``spans()``, ``points(metric, **attrs)``,
    ``total(metric, **attrs)``."""
    exporter, reader = otel_sdk
    exporter.clear()
    reader.get_metrics_data()  # what earlier tests recorded: read, and so forgotten
    yield Recorded(exporter, reader)
    exporter.clear()
