"""The strategies other layers name: reports and tables compare every strategy with these."""

BASELINE_STRATEGY = "bfs-downstream"  # the pinned ExecuTorch pass: what pass times are relative to
OPTIMUM_STRATEGY = "ilp"  # the proven optimum of transitions, where the ILP proved it
CALIBRATION_ROUND_PREFIX = "calibration-"  # calibration-N: a measurement round, not a layout policy
