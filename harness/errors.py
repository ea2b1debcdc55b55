"""The harness's errors; the shared base classes live in the leaf :mod:`strategies.errors`."""

from strategies.errors import (  # noqa: F401  (re-exported: the one set of error classes)
    InvalidAssignmentError,
    InvalidModelError,
    LayoutbenchError,
    MeasurementError,
    UnknownNameError,
    UsageError,
)


class ModelExportError(MeasurementError):
    """torch.export failed for a model."""


class LoweringError(MeasurementError):
    """ExecuTorch failed to partition, lower or serialize a model."""


class TargetUnavailableError(LayoutbenchError):
    """A target's tools are not installed or cannot run on this host: its records are
    ``skipped`` with this one-line reason, not ``failed``."""
