"""The fitted model of a device's table (:class:`GradientBoostedModel`): its fit and its prices."""

import functools
import json

import numpy as np
import pandas as pd

from costmodel.features import FEATURES, node_features
from costmodel.model import CostModel
from costmodel.queries import ANY, Query, node_queries

MEGA_LOG2 = 20  # base lines are anchored at 2**20 units of work

GRAPH_LOAD = ("log_graph_weight_bytes", "log_graph_largest_activation")
BOOSTING = {
    "objective": "regression", "learning_rate": 0.05, "num_leaves": 31, "min_data_in_leaf": 5,
    "feature_fraction": 0.9, "lambda_l2": 1.0, "max_cat_to_onehot": 64, "cat_smooth": 5,
    "deterministic": True, "force_row_wise": True, "num_threads": 1, "seed": 0, "verbose": -1,
    # A graph holding more never makes a node faster, and slows an operator's nodes whatever
    # their shapes: unconstrained, the trees use the graph's weights with shapes to tell the
    # corpus's models apart (leave one model out: median error 4.6 % against 3.3 %).
    "monotone_constraints": [int(feature in GRAPH_LOAD) for feature in FEATURES],
    "interaction_constraints": [[i for i, feature in enumerate(FEATURES) if feature not in GRAPH_LOAD],
                                [FEATURES.index(feature) for feature in ("operator", "int8", *GRAPH_LOAD)]],
}
ROUNDS = 600


class GradientBoostedModel(CostModel):
    """A node's time as a *base*, a power law of its work (its multiply-adds, or elements moved
    where it has none: ms = c * (work / 2**20) ** b) per (operator, input, output) measured at
    enough sizes, else per operator, else over all, times a correction: gradient-boosted trees
    (LightGBM) of log2(ms / base) over :mod:`costmodel.features`. The base carries the
    size dependence between the sizes measured (trees alone would price a size between two
    measured ones as one of them); the trees what depends on shapes, packing and arguments."""

    kind = "lightgbm"
    kept_prices = 500_000  # fitted prices a model keeps (about 100 MB); past that it starts over

    def __init__(self, booster_text: str, operators: list[str], base: dict):
        self.booster_text, self.operators = booster_text, operators
        # (operator, input, output) or (operator, ANY, ANY) -> (ms at 2**20 units of work, exponent,
        # log2 of the outputs computed at once, or None: see :func:`effective_log_work`)
        self.base = base

    @classmethod
    def fit(cls, training: "pd.DataFrame") -> "GradientBoostedModel":
        """The model of ``training``'s nodes (one row per measured node, its time in ``ms``): base
        lines, then the trees on log2(ms / base), a node counting by its time."""
        import lightgbm

        frame = _frame(node_queries(training))
        model = cls("", list(frame["operator"].cat.categories), _base(training, frame))
        ms = training["ms"].to_numpy()
        dataset = lightgbm.Dataset(frame[list(FEATURES)], label=np.log2(ms / model.base_ms(frame)),
                                   weight=np.sqrt(ms / ms.mean()), categorical_feature=["operator"],
                                   free_raw_data=False)
        model.booster_text = lightgbm.train(BOOSTING, dataset, num_boost_round=ROUNDS).model_to_string()
        return model

    def base_ms(self, frame) -> "np.ndarray":
        """Each row's base (rows of :func:`costmodel.features.node_features`)."""
        lines = [self.base.get((op, i, o)) or self.base.get((op, ANY, ANY)) or self.base[(ANY, ANY, ANY)]
                 for op, i, o in zip(frame["operator"].astype(str), frame["input_name"], frame["output_name"])]
        ms_per_mega, exponent, log_parallel = np.array(
            [(c, b, np.nan if p is None else p) for c, b, p in lines], dtype=float).reshape(-1, 3).T
        log_work = effective_log_work(frame["log_work"].to_numpy(), frame["log_serial"].to_numpy(),
                                      frame["log_output_elements"].to_numpy(), log_parallel)
        return ms_per_mega * np.exp2((log_work - MEGA_LOG2) * exponent)

    @functools.cached_property
    def booster(self):
        import lightgbm

        return lightgbm.Booster(model_str=self.booster_text)

    def predict(self, queries: list[Query]):
        """Each query's fitted time. A node's features are those of its signature and pair, so
        a query like one priced before (a repeated block's node, the same node in another
        strategy's problem) is not priced again: the model keeps what it priced."""
        keys = _feature_keys(queries)
        new = {key: query for key, query in zip(keys, queries) if key not in self._priced}
        if new:
            if len(self._priced) + len(new) > self.kept_prices:
                self._priced.clear()
            frame = _frame(list(new.values()), self.operators)
            correction = self.booster.predict(frame[list(FEATURES)], num_threads=1)
            self._priced.update(zip(new, (self.base_ms(frame) * np.exp2(correction)).tolist()))
        return np.array([self._priced[key] for key in keys], dtype=float)

    @functools.cached_property
    def _priced(self) -> dict:
        return {}

    def ready(self) -> None:
        """Build the booster now (importing LightGBM, parsing its trees: about two seconds once
        per process), so that no strategy's pass time pays for it."""
        _ = self.booster

    def __getstate__(self):  # a table travels to workers as text; the booster is rebuilt there
        return {"booster_text": self.booster_text, "operators": self.operators, "base": self.base}

    def to_json(self) -> dict:
        return {"kind": self.kind, "booster": self.booster_text, "operators": self.operators,
                "base": [{"operator": op, "input": i, "output": o, "ms_per_mega": c, "exponent": b, "log_parallel": p}
                         for (op, i, o), (c, b, p) in sorted(self.base.items())]}

    @classmethod
    def from_json(cls, data: dict, read_table=None) -> "GradientBoostedModel":
        base = {(e["operator"], e["input"], e["output"]): (float(e["ms_per_mega"]), float(e["exponent"]),
                                                           e["log_parallel"])
                for e in data["base"]}
        return cls(data["booster"], list(data["operators"]), base)


def _frame(queries: list[Query], operators: list[str] | None = None) -> pd.DataFrame:
    """Each query's :func:`costmodel.features.node_features`, a row each, with its pair's names; the
    operator coded by the vocabulary ``operators`` (a fit's own: the queries', sorted)."""
    frame = pd.DataFrame([node_features(q.signature, q.input, q.output, q.transition, q.load) for q in queries],
                         columns=list(FEATURES))
    operators = sorted(frame["operator"].unique()) if operators is None else operators
    frame["operator"] = pd.Categorical(frame["operator"], categories=operators)
    return frame.assign(input_name=[q.input for q in queries], output_name=[q.output for q in queries])


def _feature_keys(queries: list[Query]) -> list[tuple]:
    """What a query's fitted price depends on, hashable: its signature (serialized once per
    signature object), pair, kind and graph's load."""
    serialized: dict = {}
    keys = []
    for query in queries:
        signature = serialized.get(id(query.signature))
        if signature is None:
            signature = serialized[id(query.signature)] = json.dumps(query.signature, sort_keys=True, default=str)
        keys.append((signature, query.input, query.output, query.transition, query.load))
    return keys


def effective_log_work(log_work, log_serial, log_output_elements, log_parallel):
    """log2 of nodes' work as their dispatches see it (arrays, or a scalar ``log_parallel`` for
    all): a convolution or product computes each output from ``serial`` multiply-adds in a row
    (``log_serial``), and runs at least ``2**log_parallel`` outputs' worth of time, however few
    it has (a squeeze-excitation's 1x1 convolution of 1152 channels takes as long as its loop
    over them, not as its 55 k multiply-adds); where ``log_parallel`` is NaN or the node has no
    serial loop, its work."""
    bound = log_serial + np.maximum(log_output_elements, log_parallel)
    return np.where(np.isnan(log_parallel) | (log_serial == 0), log_work, bound)


MIN_SIZES = 3  # distinct amounts of work a base line is fitted from; fewer: the operator's line
EXPONENTS = (0.2, 1.2)


def _line(log_work: np.ndarray, ms: np.ndarray) -> tuple[float, float, float]:
    """ms = c * (work / 2**20) ** b, by least squares of log2(ms) (b held within EXPONENTS): c, b
    and the sum of squared residuals."""
    x, y = log_work - MEGA_LOG2, np.log2(ms)
    b = float(np.clip(np.polyfit(x, y, 1)[0], *EXPONENTS)) if np.ptp(x) > 0 else 1.0
    residuals = y - b * x
    return float(np.exp2(np.mean(residuals))), b, float(np.var(residuals) * len(residuals))


PARALLEL_LOG2 = (None, *range(0, 25, 2))  # outputs a dispatch computes at once, tried per base line


def _base_line(group: pd.DataFrame) -> tuple[float, float, float | None]:
    """The base line of one group of nodes (see :func:`effective_log_work`):
    of the parallel widths tried, the one whose line fits the group's times best."""
    best = None
    for log_parallel in PARALLEL_LOG2 if group["log_serial"].any() else (None,):
        log_work = effective_log_work(group["log_work"].to_numpy(), group["log_serial"].to_numpy(),
                                      group["log_output_elements"].to_numpy(),
                                      np.nan if log_parallel is None else log_parallel)
        c, b, misfit = _line(log_work, group["ms"].to_numpy())
        if best is None or misfit < best[0] - 1e-9:
            best = (misfit, (c, b, log_parallel))
    return best[1]


def _base(training: pd.DataFrame, features: pd.DataFrame) -> dict:
    """Base lines (see :class:`GradientBoostedModel`) per (operator, input, output) measured at
    enough sizes, per operator, and over everything."""
    frame = features[["log_work", "log_serial", "log_output_elements"]].assign(
        operator=features["operator"].astype(str).to_numpy(), input=training["input"].to_numpy(),
        output=training["output"].to_numpy(), ms=training["ms"].to_numpy())
    base = {(ANY, ANY, ANY): _base_line(frame.assign(log_serial=0.0))}
    for operator, group in frame.groupby("operator"):
        base[(operator, ANY, ANY)] = _base_line(group)
    for (operator, first, second), group in frame.groupby(["operator", "input", "output"]):
        if group["log_work"].nunique() >= MIN_SIZES:
            base[(operator, first, second)] = _base_line(group)
    return base
