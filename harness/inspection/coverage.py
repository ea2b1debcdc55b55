"""Whether a table's expected error holds as often as it says it does.

A record under a table states the relative error expected of its predicted time
(``predicted_error_expected``): its fitted nodes' time per operator, each operator's times the
table's error for that operator (the median over models the fit left out), combined as
:class:`costmodel.prediction.Prediction` combines them. It is a median: realized error on a
model the table never saw should lie within it for about half of such models
(``costmodel.fit.ERROR_QUANTILE``). :func:`expected_errors` states it of
measured programs, their nodes priced by the table that predicts them, as a record's would be.
Leave one model out (:func:`harness.inspection.validation.leave_one_model_out`), each model's
realized error is set against the error its held-out table states of it: :func:`covered` says
of each model whether the first lies within the second, and :func:`coverage_line` how often,
against the share the field claims.
"""

import pandas as pd

from costmodel.prediction import Prediction


def expected_errors(nodes: pd.DataFrame, prices: list, program: list[str]) -> pd.Series:
    """Per program of ``nodes`` (rows with an ``operator``, grouped by the columns ``program``),
    the relative error a record of it states: its nodes' ``prices`` (one a row) as a
    :class:`Prediction`, its :attr:`Prediction.expected_error` (NaN where it predicts no time)."""
    operators = nodes["operator"].to_numpy()
    errors = {}
    for key, rows in nodes.groupby(program).indices.items():
        error = Prediction.of((operators[row], prices[row]) for row in rows).expected_error
        errors[key] = float("nan") if error is None else error
    return pd.Series(errors, dtype=float).rename_axis(program)


def covered(summary: pd.DataFrame) -> pd.Series:
    """Per model of a validation summary (:func:`harness.inspection.validation.summary`):
    whether its realized error (the median over its programs) lies within the error its held-out
    table states (the median over the same programs)."""
    return (summary["median_error"] <= summary["expected_error"]).set_axis(summary["model"])


def coverage_line(summary: pd.DataFrame, quantile: float) -> str:
    """How often the models' realized error lies within the stated one, against how often the
    field claims it does (``quantile``)."""
    within = covered(summary)
    share = f" ({within.mean():.0%})" if len(within) else ""
    return (f"realized error within the expected error on {int(within.sum())} of {len(within)} models{share}; "
            f"the expected error is a median over held-out models: it claims {quantile:.0%}")
