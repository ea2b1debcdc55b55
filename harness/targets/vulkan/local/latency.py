"""Per-inference latency and load time of a program run, from the runtime's own events.

An ExecuTorch runtime built with the event tracer (``executor_runner`` with
``-DEXECUTORCH_ENABLE_EVENT_TRACER=ON``, the pybindings with ``enable_etdump``) writes an
ETDump of its own times: ``Method::init`` once (loading the method; for ET-VK, building the
compute graph and its shader pipelines and prepacking the weights) and, per execution,
``Method::execute`` (one whole inference as its caller waits for it) with ET-VK's parts inside
it: ``ETVK_COPY_INPUTS`` (the caller's inputs into staging memory),
``ETVK_COMPUTE_GRAPH_EXECUTE`` (submitting the graph's GPU work and waiting for it) and
``ETVK_COPY_OUTPUTS``.

Between the graph's end and the outputs' copy, ET-VK reads every dispatch's GPU timestamp and
logs it: the event tracer's own work (about a microsecond per dispatch), and what moves between
runner processes (0.33 to 0.79 ms of a 5.2 ms mobilevit_xs inference on an H100, as the
tracer's buffer grows). So the latency is ``Method::execute`` less it, per execution; the
record keeps both (``method_execute_ms``, ``event_tracer_ms``).

A runner process makes ``warmup + iterations`` executions into one ETDump (``executor_runner``
writes its one event tracer after the last). A program runs in ``--processes`` of them
(default 3) and a record holds the fastest one's figures: now and then a process runs a few
per cent slow throughout. A process's first execution can be far slower than the next
(bfs-downstream's ETDump in ``tests/data/etvk``, lavapipe: 44.3 ms, then 20.4 and 21.4 ms; a
tiny XNNPACK program through the pip pybindings here: 0.163 ms, then 0.006, 0.003, 0.003), so
the first ``warmup`` executions of each process are the warm-up, left out; no separate warm-up
process is started. ``Method::init`` is that process's load, with the driver's pipeline cache
in whatever state earlier runs left it.

Where no ETDump was written (a runner without the event tracer) the latency is the wall-clock
one timed from outside the runtime (``remote.time_runner``, or the pybindings worker's clock);
``latency_source`` says which.
"""

import statistics
from dataclasses import dataclass
from pathlib import Path

from harness.results.schema import ETDUMP, WALL_CLOCK

EXECUTE = "Method::execute"
LOAD = "Method::init"
COPY_INPUTS = "ETVK_COPY_INPUTS"
GRAPH_EXECUTE = "ETVK_COMPUTE_GRAPH_EXECUTE"
COPY_OUTPUTS = "ETVK_COPY_OUTPUTS"
NS_PER_MS = 1e6  # event times are the runtime's clock ticks, nanoseconds on Linux

# The record fields latency_fields writes.
LATENCY_FIELDS = ("latency_ms_median", "latency_ms_p10", "latency_ms_p90", "latency_ms_min", "latency_ms_max",
                  "latency_source", "load_ms", "copy_inputs_ms", "graph_execute_ms", "method_execute_ms",
                  "event_tracer_ms")


@dataclass(frozen=True)
class RuntimeTimes:
    """The runtime's own times in one ETDump, in ms, one entry per execution in the order
    they ran; the ET-VK parts summed over the program's delegate calls (empty for other
    backends; ``event_tracer_ms`` is then 0)."""

    load_ms: float | None
    execute_ms: list[float]
    copy_inputs_ms: list[float]
    graph_execute_ms: list[float]
    event_tracer_ms: list[float]

    @property
    def latency_ms(self) -> list[float]:
        """Each execution's ``Method::execute`` less the event tracer's logging inside it."""
        return [whole - tracer for whole, tracer in zip(self.execute_ms, self.event_tracer_ms)]


def read_runtime_times(etdump: Path) -> RuntimeTimes:
    """The ``Method::init``, ``Method::execute`` and ET-VK part events of ``etdump``, read
    run by run (the ETDump's blocks, one per execution, in the order they ran)."""
    # Imported here, not at the top: every sweep's worker imports this module, few read ETDumps.
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    load = None
    executions = []
    for run in deserialize_from_etdump_flatcc(Path(etdump).read_bytes()).run_data:
        spans: dict[str, list[tuple[int, int]]] = {}
        for event in run.events or []:
            profile = event.profile_event
            name = profile and (profile.name or profile.delegate_debug_id_str)
            if name in (LOAD, EXECUTE, COPY_INPUTS, GRAPH_EXECUTE, COPY_OUTPUTS):
                spans.setdefault(name, []).append((profile.start_time, profile.end_time))
        if LOAD in spans:
            load = _total_ms(spans[LOAD])
        if EXECUTE in spans:
            executions.append(spans)
    return RuntimeTimes(load, [_total_ms(e[EXECUTE]) for e in executions],
                        [_total_ms(e[COPY_INPUTS]) for e in executions if COPY_INPUTS in e],
                        [_total_ms(e[GRAPH_EXECUTE]) for e in executions if GRAPH_EXECUTE in e],
                        [_event_tracer_ms(e) for e in executions])


def _total_ms(spans: list[tuple[int, int]]) -> float:
    """ET-VK's parts come once per delegate call: a program of several partitions adds them up."""
    return sum(end - start for start, end in spans) / NS_PER_MS


def _event_tracer_ms(spans: dict[str, list[tuple[int, int]]]) -> float:
    """The event tracer's logging of the dispatches' GPU timestamps in one execution: from each
    delegate call's graph end to its outputs' copy."""
    ends = sorted(end for _, end in spans.get(GRAPH_EXECUTE, []))
    starts = sorted(start for start, _ in spans.get(COPY_OUTPUTS, []))
    return sum(start - end for end, start in zip(ends, starts)) / NS_PER_MS


def _percentile(values: list[float], percent: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * percent / 100
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def latency_summary(latencies_ms: list[float]) -> dict:
    """The distribution of per-inference latencies: median, p10 and p90, min and max."""
    return {
        "latency_ms_median": statistics.median(latencies_ms),
        "latency_ms_p10": _percentile(latencies_ms, 10),
        "latency_ms_p90": _percentile(latencies_ms, 90),
        "latency_ms_min": min(latencies_ms),
        "latency_ms_max": max(latencies_ms),
    }


def event_latency(processes: list[RuntimeTimes], iterations: int, source: str = "ETDump") -> dict:
    """Record fields of the last ``iterations`` executions of the fastest runtime process (the
    least median latency; those before were the warm-up). Now and then a process runs a few per
    cent slow throughout, its graph's submit-and-wait too while its dispatches' GPU time does
    not: time added from outside the program, so the least-disturbed process is the figure."""
    fields = [_process_latency(times, iterations, source) for times in processes]
    return min(fields, key=lambda process: process["latency_ms_median"])


def _process_latency(times: RuntimeTimes, iterations: int, source: str) -> dict:
    if len(times.execute_ms) < iterations:
        raise ValueError(f"{source} holds {len(times.execute_ms)} {EXECUTE} events, fewer than the "
                         f"{iterations} timed inferences: is it this run's ETDump?")

    def timed_median(values: list[float]) -> float | None:
        return statistics.median(values[-iterations:]) if values else None

    return {**latency_summary(times.latency_ms[-iterations:]), "latency_source": ETDUMP, "load_ms": times.load_ms,
            "copy_inputs_ms": timed_median(times.copy_inputs_ms),
            "graph_execute_ms": timed_median(times.graph_execute_ms),
            "method_execute_ms": timed_median(times.execute_ms), "event_tracer_ms": timed_median(times.event_tracer_ms)}


def latency_fields(etdumps: list[Path], iterations: int, wall_clock_ms: list[float] | None) -> dict:
    """A run's latency fields: from the events of its ETDumps (one per runtime process) where
    the runtime wrote them, else from the latencies timed from outside it (``wall_clock_ms``)."""
    if etdumps:
        return event_latency([read_runtime_times(etdump) for etdump in etdumps], iterations, str(etdumps[0]))
    return {**dict.fromkeys(LATENCY_FIELDS), **latency_summary(wall_clock_ms), "latency_source": WALL_CLOCK}
