"""The target registry, in the style of the model and strategy registries.

A target is where a model's lowered program is measured: a :class:`Target` subclass with
``@register_target("name")`` declaring the schema metrics it adds (``metrics``), whether
layout strategies apply (``uses_strategies``; Arm's backends have no pluggable layout pass, so
their records carry no strategy), and ``measure``, which fills a record's fields for one
(model, strategy). The registry imports every public module directly under
``harness/targets/`` and every ``targets.py`` of its sub-packages when first asked.
"""

import dataclasses
import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from costmodel.table import CostTable
from harness.results.provenance import provenance, tool_versions
from layoutkit.errors import UnknownNameError, UsageError
from layoutkit.registry import direct_public_module, import_built_ins

RUNNER_ENV = "LAYOUTBENCH_ET_RUNNER"
DEVICE_INDEX_ENV = "ETVK_DEVICE_INDEX"  # ET-VK's own, read by its runtime too
VULKAN_ICD_ENV = "LAYOUTBENCH_VULKAN_ICD"

_targets: dict[str, type] = {}


@dataclass
class RunSettings:
    """How programs are run where a target runs them."""

    warmup: int = 1
    iterations: int = 10
    repeats: int = 3  # executor_runner: wall-clock differences taken, median reported
    processes: int = 3  # runtime processes per program where it times itself (ETDump): the fastest is kept


@dataclass(frozen=True)
class HostSettings:
    """What the user's environment says of this host's runtimes: read where a process starts
    (:meth:`from_environment`), carried in the context to the measurements."""

    et_runner: str | None = None  # the runner, where --et-runner names none
    vulkan_device_index: str | None = None  # the device ET-VK runs on (harness.targets.vulkan.remote.device)
    vulkan_icd: str | None = None  # the Vulkan driver of the VGF scenario runner (None: lavapipe)

    @classmethod
    def from_environment(cls, environment: Mapping[str, str]) -> "HostSettings":
        """The settings a process's ``environment`` names: ``$LAYOUTBENCH_ET_RUNNER``,
        ``$ETVK_DEVICE_INDEX``, ``$LAYOUTBENCH_VULKAN_ICD``."""
        return cls(environment.get(RUNNER_ENV) or None, environment.get(DEVICE_INDEX_ENV),
                   environment.get(VULKAN_ICD_ENV) or None)


@dataclass
class MeasureContext:
    """What a measurement may need beyond the model and the strategy."""

    results_dir: Path = Path("results")
    et_runner: str | None = None
    run_settings: RunSettings = field(default_factory=RunSettings)
    # The GPU cost table records predict with and ilp-time minimises: read once at the edge (the
    # command line, the asv suites), carried to every worker and handed to each pass that prices.
    costs: CostTable | None = None
    host: HostSettings = field(default_factory=HostSettings)


class Target:
    """One target. ``measure`` writes into ``fields`` as it goes: what was measured before a
    failure stays in the failed record."""

    name: str = ""
    uses_strategies: bool = True
    metrics: tuple[str, ...] = ()
    tools: tuple[str, ...] = ("torch", "executorch", "timm")  # distributions its numbers depend on
    runs_programs: bool = False  # its numbers also depend on the machine and the run settings

    def environment(self, context: "MeasureContext") -> dict:
        """What this target's numbers depend on besides the model's and the strategy's code
        (part of every record's identity): tool versions and, where programs run, the machine
        and how they are run. Called after :meth:`prepare`."""
        environment = {"tools": tool_versions(self.tools)}
        if self.runs_programs:
            facts = provenance()
            environment.update(machine=facts["machine"], cpu=facts["cpu"],
                               run_settings=dataclasses.asdict(context.run_settings))
        return environment

    @property
    def failures_repeat(self) -> bool:
        """Whether a failure of the lowering, a strategy or a tool (an error raised, a crash)
        would repeat under the same identity, so its record is reused as an ok one is. Not
        where programs run on a device: its state is no part of the identity."""
        return not self.runs_programs

    def reusable(self, record: dict, context: "MeasureContext") -> bool:
        """Whether a record of the planned identity (results directory or record cache) can stand
        for a new measurement: not where files kept beside it (programs, ETDumps) are missing."""
        return True

    def prepare(self, context: MeasureContext) -> None:
        """Check once per sweep that this host can measure; raise TargetUnavailableError
        (every record skipped, with its message) or a UsageError (a bad option)."""

    def load_cached_model(self, model) -> None:
        """Read from the disk caches what :meth:`prepare_model` would build, computing nothing: a
        local worker does it while the ones before it still measure (:class:`harness.sweep.workers.LocalWorkers`)."""

    def prepare_model(self, model) -> None:
        """Build what every strategy of ``model`` shares (a worker does it before the first
        measurement, so a crash there is known to be the model's, not one strategy's)."""

    def measure(self, model, strategy: str | None, fields: dict, context: MeasureContext) -> None:
        """Measure ``model`` (a :class:`harness.pipeline.model.ModelPipeline`) with ``strategy``
        (None where ``uses_strategies`` is false) into ``fields``."""
        raise NotImplementedError


def _load_built_ins() -> None:
    import_built_ins("harness.targets",
                     lambda relative: direct_public_module(relative) or relative.endswith(".targets"))


def register_target(name: str):
    """Class decorator: register a Target subclass under ``name``."""

    def decorate(cls):
        cls.name = name
        _targets[name] = cls
        return cls

    return decorate


def list_targets(pattern: str = "*") -> list[str]:
    _load_built_ins()
    return sorted(name for name in _targets if fnmatch.fnmatch(name, pattern))


def get_target(name: str) -> Target:
    """A fresh instance of the target registered as ``name``."""
    _load_built_ins()
    if name not in _targets:
        raise UnknownNameError("target", name, list_targets())
    return _targets[name]()


def resolve_targets(spec: str) -> list[str]:
    """Target names from a comma list, each checked."""
    names = [t.strip() for t in spec.split(",") if t.strip()]
    if not names:
        raise UsageError(f"no target named in {spec!r}; known: {', '.join(list_targets())}")
    for name in names:
        get_target(name)
    return names
