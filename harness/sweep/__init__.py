"""Sweeps: models x strategies x targets planned against what is already recorded
(:mod:`~harness.sweep.planning`), measured one job per model (:mod:`~harness.sweep.job`) in
worker processes, locally or on Ray (:mod:`~harness.sweep.execution`), which report typed
events (:mod:`~harness.sweep.events`). Above the targets: it drives them."""
