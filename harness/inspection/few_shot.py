"""Whether another device's table (the *prior*) holds on a new device, from a few programs run
there (``calibrate --prior``).

The programs are chosen by :func:`costmodel.program_choice.choose_programs`; the table
transferred from them is :func:`costmodel.fit.transferred`'s. :func:`prior_check` says whether
the prior holds as it is: where a table transferred from the same programs would not predict
them better, by more than the prior's spread, than the prior alone (each program predicted
with its model left out of the transfer). How well transfers predict models they never saw,
budget by budget, is ``benchmarks/few_shot_study.py``'s (docs/new-device.md).
"""

from dataclasses import dataclass

import pandas as pd

from costmodel.fit import transferred
from costmodel.measurements import Measurements
from costmodel.table import CostTable
from costmodel.transferred import prior_ratios
from harness.inspection import validation

# A prior off by more than this on the check programs (median) does not hold, however poorly a
# transfer from them predicts: nn-Meter's and LitePred's bound for a usable prediction.
HOLDS_WITHIN = 0.10


@dataclass
class PriorCheck:
    """Whether a prior holds on a device, from a few programs measured there."""

    prior_error: float  # median |error| of the prior's predictions of the programs
    transferred_error: float  # the same of tables transferred without each program's model
    factor: float  # measured total over the prior's predicted total
    spread: float  # the prior's

    @property
    def holds(self) -> bool:
        """The prior predicts the programs within :data:`HOLDS_WITHIN`, and tables transferred
        without each one's model do not predict them better by more than the prior's spread."""
        return self.prior_error <= HOLDS_WITHIN and self.transferred_error >= self.prior_error - self.spread


def prior_check(prior: CostTable, measurements: Measurements, ratios: pd.DataFrame | None = None) -> PriorCheck:
    """:class:`PriorCheck` of ``measurements`` (programs of two models or more; ``ratios``:
    :func:`costmodel.transferred.prior_ratios` of them, where the caller has them)."""
    models = sorted(measurements.programs["model"].unique())
    if len(models) < 2:
        raise ValueError("checking a prior needs programs of two models or more")
    own = validation.predicted_programs(measurements, prior)
    ratios = prior_ratios(prior, measurements) if ratios is None else ratios
    left_out = validation.left_out_programs(measurements, lambda kept: transferred(prior, kept, ratios), models)
    return PriorCheck(float(own["error"].abs().median()), float(left_out["error"].abs().median()),
                      float(own["measured_ms"].sum() / own["predicted_ms"].sum()), prior.spread)
