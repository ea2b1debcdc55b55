"""The kernel every package of layoutbench shares, and which imports nothing of theirs: the
errors (:mod:`layoutkit.errors`), how user code is named on the command line
(:mod:`layoutkit.plugins`), how a registry loads its built-ins (:mod:`layoutkit.registry`),
and the strategies other layers compare against by name (:mod:`layoutkit.reference_strategies`).

Importing it makes this process import our code and users' from the source as it is now
(:mod:`layoutkit.source_loader`): each of our packages imports it first.
"""

from layoutkit import source_loader

source_loader.install()
