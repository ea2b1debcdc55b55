"""layoutbench's asv suites. asv imports this package before any suite, so it is where a
benchmark process starts: the cache is the one its environment names, and the libraries'
chatter (ExecuTorch's INFO line per inserted transition, torch's warnings) is off here
and in every process the suites start, as in a command without ``--verbose``;
``LAYOUTBENCH_QUIET=0`` shows it."""

import os

from harness import quiet
from layoutkit.files import CacheSettings, install

install(CacheSettings.from_environment(os.environ))
quiet.apply(verbose=os.environ.get(quiet.QUIET_ENV) == "0", environment=os.environ)
