"""The value types of the command line's options: argparse types that turn text into a
number, or say in one line what was expected; and the arguments several commands share."""

import argparse
import os

from costmodel.device_limits import DeviceLimits
from costmodel.table import COSTS_ENV


def whole_number(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number of at least ``minimum`` (and at most ``maximum``)."""
    expected = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"

    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum or (maximum is not None and int(text) > maximum):
            raise argparse.ArgumentTypeError(f"expected a whole number {expected}, not {text!r}")
        return int(text)

    return parse


positive = whole_number(1)
count = whole_number(0)
port = whole_number(1, 65535)  # a TCP port


def gibibytes(text: str) -> int:
    """An argparse type: a size in GiB (a number > 0), in bytes."""
    try:
        size = float(text)
    except ValueError:
        size = 0
    if size <= 0:
        raise argparse.ArgumentTypeError(f"expected a size in GiB > 0, not {text!r}")
    return int(size * (1 << 30))


def device_limits(text: str):
    """An argparse type: a device's limits, ``maxImageDimension3D=16384,...`` (:mod:`costmodel.device_limits`)."""
    try:
        return DeviceLimits.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_model_and_strategies(command, vs_help: str) -> None:
    """The arguments of a command that looks at one model under a strategy and, with --vs, another."""
    command.add_argument("model")
    command.add_argument("--strategy", required=True)
    command.add_argument("--vs", help=vs_help)


def add_costs_argument(command, what: str) -> None:
    """--costs: a device's cost table (default $LAYOUTBENCH_COSTS), for ``what``."""
    command.add_argument("--costs", metavar="FILE", default=os.environ.get(COSTS_ENV),
                         help=f"a device's GPU cost table: {what} (default: ${COSTS_ENV})")
