"""Metrics and spans through the OpenTelemetry API (the ``otel`` extra), for whichever
exporter the site runs.

Optional: without ``opentelemetry-api`` installed :data:`ENABLED` is ``False`` (one check,
when this module is imported), every function here returns at once, and nothing of
OpenTelemetry is imported. With it, the tracer, the meter and the instruments are made on
first use, from the global providers the site sets (before or after: the API's proxies
forward to them), under the name ``django_eid`` and the package's version.

What is recorded (attributes are codes, never personal data, a URL path or a secret):

* a ``CLIENT`` span per HTTP attempt at the broker (semantic conventions: ``http.request.
  method``, ``server.address``, ``server.port``, ``http.response.status_code``,
  ``error.type``, ``http.request.resend_count``), inside an ``INTERNAL`` span per call of
  the client (``eid.broker.operation``), and ``http.client.request.duration``;
* the identifications started and finished, their duration, the successes rejected
  afterwards, the failed broker calls of a row (:func:`record_event`, from the audit trail);
* the token endpoint's requests and the shared cache's tokens (``eid.broker.token.
  requests``), and the starts refused by the limits (``eid.refusals``, :func:`refused`).

``docs/guides/operations.md`` ("Metrics and traces") lists them for operators.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from django_eid.conf import EidSettings

__all__ = ["ENABLED", "enabled", "record_event", "refused"]

NAME: Final = "django_eid"


def _api_installed() -> bool:
    try:
        # Finds the package without importing it (None also when a test blocked it).
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except (ImportError, ValueError):
        return False


#: Whether the OpenTelemetry API is installed: the one check the hot paths make.
ENABLED: bool = _api_installed()

#: Buckets (seconds) of the broker calls' histogram: the semantic conventions' advice.
HTTP_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)
#: Buckets (seconds) of an identification, start to finish: a person at their eID.
IDENTIFICATION_BUCKETS: Final = (5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 600, 1800, 3600)
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}

T = TypeVar("T")

#: The client call under way in this context: ``(eid.broker.operation, eid.broker.api)``.
_operation: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "django_eid_operation", default=None
)


def enabled() -> bool:
    """Whether OpenTelemetry is installed (and so whether anything is recorded)."""
    return ENABLED


class _Instruments:
    """The tracer and the instruments, made once (:func:`_instruments`)."""

    def __init__(self) -> None:
        from opentelemetry import metrics, trace

        from django_eid import __version__

        self.trace = trace
        self.tracer = trace.get_tracer(NAME, __version__)
        #: The providers of the API alone, until the site sets its own: no span to make.
        self.untraced = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        meter = metrics.get_meter(NAME, __version__)
        self.http_duration = _histogram(
            meter,
            "http.client.request.duration",
            "Duration of the HTTP requests to the broker.",
            HTTP_BUCKETS,
        )
        self.started = meter.create_counter(
            "eid.identifications.started",
            unit="{identification}",
            description="Identifications started (status PENDING, or ERROR when the start failed).",
        )
        self.finished = meter.create_counter(
            "eid.identifications.finished",
            unit="{identification}",
            description="Identifications that left PENDING, by status and outcome.",
        )
        self.rejected = meter.create_counter(
            "eid.identifications.rejected",
            unit="{identification}",
            description="Successful identifications a site rule or receiver rejected afterwards.",
        )
        self.duration = _histogram(
            meter,
            "eid.identification.duration",
            "Time from an identification's start to its end.",
            IDENTIFICATION_BUCKETS,
        )
        self.broker_errors = meter.create_counter(
            "eid.broker.errors",
            unit="{error}",
            description="Broker calls for an identification that failed.",
        )
        self.token_requests = meter.create_counter(
            "eid.broker.token.requests",
            unit="{request}",
            description="Requests to the token endpoint, and tokens read from TOKEN_CACHE.",
        )
        self.refusals = meter.create_counter(
            "eid.refusals",
            unit="{start}",
            description="Starts refused by the pending limit or the anonymous caps.",
        )


def _span(
    otel: _Instruments, name: str, kind: Any, attributes: dict[str, str | int]
) -> contextlib.AbstractContextManager[Span | None]:
    """A span made current, or nothing while the site has set no tracer provider (the API
    alone, maybe installed by another package: a no-op span would cost more than the
    rest)."""
    if isinstance(otel.trace.get_tracer_provider(), otel.untraced):
        return contextlib.nullcontext()
    # Exceptions are not recorded: their messages may name a URL or the broker's ids.
    return otel.tracer.start_as_current_span(
        name,
        kind=kind,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )


def _histogram(meter: Any, name: str, description: str, buckets: tuple[float, ...]) -> Any:
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=buckets
        )
    except TypeError:  # opentelemetry-api before 1.23 takes no advice
        return meter.create_histogram(name, unit="s", description=description)


_made: list[_Instruments] = []
_lock = threading.Lock()


def _instruments() -> _Instruments:
    if not _made:
        with _lock:
            if not _made:
                _made.append(_Instruments())
    return _made[0]


def _attributes(values: dict[str, str | int | None]) -> dict[str, str | int]:
    """``values`` without the empty ones (OpenTelemetry takes no ``None``)."""
    # str(): a model's choices are str subclasses; exporters want the plain value.
    return {
        name: value if isinstance(value, int) else str(value)
        for name, value in values.items()
        if value is not None and value != ""
    }


def _error_type(err: BaseException) -> str:
    """``error.type`` of an exception: its fully qualified class name, never its message."""
    cls = type(err)
    return f"{cls.__module__}.{cls.__qualname__}"


def _current_api() -> str:
    current = _operation.get()
    if current is not None:
        return current[1]
    from django_eid.conf import eid_settings

    return eid_settings.BROKER_API


# -- broker calls ----------------------------------------------------------------------
def operation(name: str, settings: EidSettings) -> contextlib.AbstractContextManager[None]:
    """The span of one call of the client (``eid.broker.operation`` ``name``); its HTTP
    attempts and a token request it needs are its children. Call only when :data:`ENABLED`.
    """
    return _operation_span(name, settings.BROKER_API)


@contextlib.contextmanager
def _operation_span(name: str, api: str) -> Iterator[None]:
    otel = _instruments()
    attributes = _attributes({"eid.broker.api": api, "eid.broker.operation": name})
    token = _operation.set((name, api))
    try:
        with _span(otel, f"eid.broker {name}", otel.trace.SpanKind.INTERNAL, attributes) as span:
            try:
                yield
            except BaseException as err:
                _failed(otel, span, _error_type(err))
                if name == "token":
                    _count_token(otel, api, err)
                raise
            if name == "token":
                _count_token(otel, api, None)
    finally:
        _operation.reset(token)


def _failed(otel: _Instruments, span: Span | None, error_type: str) -> None:
    if span is None:
        return
    span.set_attribute("error.type", error_type)
    span.set_status(otel.trace.Status(otel.trace.StatusCode.ERROR))


def _count_token(otel: _Instruments, api: str, err: BaseException | None) -> None:
    from django_eid.exceptions import TokenError

    if err is None:
        result, error_type = "issued", None
    else:
        result = "refused" if isinstance(err, TokenError) else "error"
        error_type = _error_type(err)
    otel.token_requests.add(
        1,
        _attributes({"eid.broker.api": api, "eid.token.result": result, "error.type": error_type}),
    )


def token_from_cache() -> None:
    """Count a token this process read from ``TOKEN_CACHE`` (another worker fetched it)."""
    if not ENABLED:
        return
    otel = _instruments()
    otel.token_requests.add(
        1, _attributes({"eid.broker.api": _current_api(), "eid.token.result": "cached"})
    )


def http_attempt(what: str, resend_count: int, send: Callable[[], T]) -> T:
    """Run ``send``, one HTTP attempt of ``what`` (``"METHOD URL"``), in a ``CLIENT`` span,
    and record its duration. Call only when :data:`ENABLED`.

    Only the method, host and port of the URL are kept: its path and query may hold a
    session's id.
    """
    otel = _instruments()
    method, _, url = what.partition(" ")
    parts = urlsplit(url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        port = None
    operation_name, api = _operation.get() or ("other", _current_api())
    common = _attributes(
        {
            "http.request.method": method,
            "server.address": parts.hostname,
            "server.port": port,
            "eid.broker.api": api,
            "eid.broker.operation": operation_name,
        }
    )
    span_attributes = dict(common)
    if resend_count:
        span_attributes["http.request.resend_count"] = resend_count
    started = time.perf_counter()
    with _span(otel, method, otel.trace.SpanKind.CLIENT, span_attributes) as span:
        try:
            answer = send()
        except BaseException as err:
            error_type = _error_type(err)
            _failed(otel, span, error_type)
            if span is not None:
                span.set_attribute("eid.broker.status_class", "error")  # no answer
            ended = {**common, "error.type": error_type, "eid.broker.status_class": "error"}
            otel.http_duration.record(time.perf_counter() - started, ended)
            raise
        status: int = getattr(answer, "status", 0)
        ended = {
            **common,
            "http.response.status_code": status,
            "eid.broker.status_class": f"{status // 100}xx",
        }
        if span is not None:
            span.set_attribute("http.response.status_code", status)
            span.set_attribute("eid.broker.status_class", ended["eid.broker.status_class"])
        if status >= 400:
            ended["error.type"] = str(status)
            _failed(otel, span, str(status))
        otel.http_duration.record(time.perf_counter() - started, ended)
        return answer


# -- identifications ---------------------------------------------------------------------
def record_event(
    *,
    kind: str,
    finishing: bool,
    status: str,
    outcome: str,
    purpose: str,
    broker_api: str,
    provider: str,
    display: str,
    duration_ms: int | None,
) -> None:
    """Count one audit event (called once its transaction committed).

    ``started`` counts in ``eid.identifications.started``; an event ``finishing`` an
    identification (one of :data:`django_eid.audit.FINISHING`: it left ``PENDING``) in
    ``eid.identifications.finished`` and, with a duration, ``eid.identification.duration``; ``rejected`` (a
    success a site rule or receiver turned ``REJECTED`` afterwards) in ``eid.
    identifications.rejected``, so that a finished identification is counted once;
    ``broker_error`` in ``eid.broker.errors``. The other kinds are no metric.
    """
    if not ENABLED:
        return
    attributes = _attributes(
        {
            "eid.broker.api": broker_api,
            "eid.provider": provider,
            "eid.purpose": purpose,
            "eid.display": display,
        }
    )
    if kind == "started":
        _instruments().started.add(1, {**attributes, **_attributes({"eid.status": status})})
    elif finishing:
        otel = _instruments()
        outcome = _bounded(outcome)
        ended = {**attributes, **_attributes({"eid.status": status, "eid.outcome": outcome})}
        otel.finished.add(1, ended)
        if duration_ms is not None:
            otel.duration.record(max(duration_ms, 0) / 1000, ended)
    elif kind == "rejected":
        rejected = _attributes({"eid.outcome": _bounded(outcome)})
        _instruments().rejected.add(1, {**attributes, **rejected})
    elif kind == "broker_error":
        failed = _attributes({"eid.outcome": _bounded(outcome)})
        _instruments().broker_errors.add(1, {**attributes, **failed})


#: The most distinct outcome codes a process reports; any further one is ``other``. An
#: outcome may be a broker's error code or an Error URL's status (codes, at most 64
#: characters: django_eid.audit.code), which the return's URL carries: a metric's series
#: must not grow with what browsers send.
MAX_OUTCOMES: Final = 100
_outcomes_seen: set[str] = set()


def _bounded(outcome: str) -> str:
    if outcome in _outcomes_seen or not outcome:
        return outcome
    with _lock:
        if len(_outcomes_seen) >= MAX_OUTCOMES:
            return "other"
        _outcomes_seen.add(outcome)
    return outcome


def refused(code: str) -> None:
    """Count a start refused by a limit (``eid.outcome``: ``too_many_pending``,
    ``too_many_starts``)."""
    if not ENABLED:
        return
    _instruments().refusals.add(1, {"eid.outcome": code})
