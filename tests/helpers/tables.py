"""Cost tables the tests price with."""

from costmodel.features import TRANSITION
from costmodel.per_operator import PerOperatorModel
from costmodel.queries import ANY
from costmodel.table import CostTable

# Transitions priced alike, operators not at all: ilp-time then solves as quickly as ilp on
# every model. Tests of time itself (tests/test_gpu_time.py) price with tables of their own.
TRANSITIONS_ONLY = CostTable("transitions only", PerOperatorModel({(TRANSITION, ANY, ANY): (0.005, 0.01)})).identified()
