"""Errors every layer of layoutbench shares; a leaf module (it imports nothing of ours, nor
any heavy library), so the registries, the targets and the results layer can all use it.

A ``LayoutbenchError`` is the user's to fix: its message is the whole explanation and is
shown as one line, without a traceback. Two families tell the command line what to do:
``UsageError`` (the command was wrong: exit 2, nothing measured) and ``MeasurementError``
(a model, strategy or tool failed on one measurement: a ``failed`` record, exit 1).
"""

import errno


class LayoutbenchError(Exception):
    """Base class: the message is the whole explanation, shown without a traceback."""


class UsageError(LayoutbenchError):
    """The command cannot run as given (a bad name, option or path): exit 2, nothing recorded."""


class UnknownNameError(UsageError):
    """A model, strategy, zoo or target name that nothing resolves."""

    def __init__(self, kind: str, name: str, known: list[str], hint: str = ""):
        self.name = name
        super().__init__(f"unknown {kind} '{name}'; known: {', '.join(known)}{hint}")


class MeasurementError(LayoutbenchError):
    """One measurement failed for a reason the message states: a ``failed`` record."""


class InvalidModelError(MeasurementError):
    """A model that resolves by name but cannot be built or measured as asked (a size out of
    range, no fused attention to unfuse, a factory that returns the wrong thing)."""


class UnavailableError(LayoutbenchError):
    """Something a measurement needs is not on this host (a tool, a runtime, a cost table):
    its records are ``skipped`` with this one-line reason, not ``failed``."""


class OutOfSpaceError(MeasurementError):
    """A result could not be written for want of space (a full disk, a quota): the command
    fails (exit 1), keeping what it wrote before."""


class InvalidAssignmentError(MeasurementError):
    """A strategy gave an operator a tensor representation the operator does not accept."""


OUT_OF_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # a full disk or quota: the host's, not the command's


def last_line(text: str, fallback: str = "no output") -> str:
    """The last line a tool wrote (``fallback`` where it wrote nothing), for a one-line error."""
    return (text.strip().splitlines() or [fallback])[-1]


def write_error(what: str, error: OSError, option: str) -> LayoutbenchError:
    """One line for ``error`` writing ``what``: a full disk or quota fails the command (exit
    1: what was written before it is kept); a path that cannot be written (read-only, a
    directory, under a file) is the command's to change, with ``option`` (exit 2)."""
    if error.errno in OUT_OF_SPACE_ERRNOS:
        return OutOfSpaceError(f"cannot write {what}: {error.strerror}; free space and run the command again")
    return UsageError(f"cannot write {what}: {error.strerror or error}; name another with {option}")
