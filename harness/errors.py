"""The harness's errors; the shared base classes live in the shared kernel, :mod:`layoutkit.errors`."""

from layoutkit.errors import (  # noqa: F401  (re-exported: the one set of error classes)
    InvalidAssignmentError, InvalidModelError, LayoutbenchError, MeasurementError, UnavailableError, UnknownNameError,
    UsageError)


class ModelExportError(MeasurementError):
    """torch.export failed for a model."""


class LoweringError(MeasurementError):
    """ExecuTorch failed to partition, lower or serialize a model."""


class LimitsExceededError(MeasurementError):
    """A program whose tensors break its cost table's device limits: not run, since a device
    may compute wrong values past them without an error."""


class RuntimeBuildError(LayoutbenchError):
    """``layoutbench runtime build`` could not configure or compile ExecuTorch's runner, or
    get a tool it needs; the message says where the log is or what to install."""


class TargetUnavailableError(UnavailableError):
    """A target's tools are not installed or cannot run on this host: every record of the
    target is ``skipped`` with this one-line reason."""


def describe(error: BaseException) -> str:
    """One line for a record's reason: ours as phrased, anything else as its type and first line."""
    if isinstance(error, LayoutbenchError):
        return str(error)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else 'no message'}"
