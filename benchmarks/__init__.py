"""layoutbench's asv suites. asv imports this package before any suite, so the libraries'
chatter (ExecuTorch's INFO line per inserted transition, torch's warnings) is off here
and in every process the suites start, as in a command without ``--verbose``;
``LAYOUTBENCH_QUIET=0`` shows it."""

import os

from harness import quiet

quiet.apply(verbose=os.environ.get(quiet.QUIET_ENV) == "0")
