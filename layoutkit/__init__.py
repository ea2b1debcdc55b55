"""The kernel every package of layoutbench shares, and which imports nothing of theirs: the
errors (:mod:`layoutkit.errors`), how user code is named on the command line
(:mod:`layoutkit.plugins`), how a registry loads its built-ins (:mod:`layoutkit.registry`),
and the strategies other layers compare against by name (:mod:`layoutkit.reference_strategies`).
"""
