"""Errors a user of layoutbench can cause, each rendered by the CLI as one line."""


class LayoutbenchError(Exception):
    """Base class: the message is the whole explanation, shown without a traceback."""


class UnknownNameError(LayoutbenchError):
    """A model or strategy name that no registry knows."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = ""):
        self.name = name
        listing = ", ".join(known)
        super().__init__(f"unknown {kind} '{name}'; known: {listing}{hint}")


class ModelExportError(LayoutbenchError):
    """torch.export failed for a zoo model."""


class InvalidAssignmentError(LayoutbenchError):
    """A strategy gave an operator a tensor representation the operator does not accept."""


class LoweringError(LayoutbenchError):
    """ExecuTorch failed to partition, lower or serialize a model."""


class TargetUnavailableError(LayoutbenchError):
    """A target's tools are not installed or cannot run on this host: its records are
    ``skipped`` with this one-line reason, not ``failed``."""
