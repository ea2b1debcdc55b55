"""asv suite: how the ILP's formulation and solve time scale.

``setup_cache`` lowers each graph to the layout pass once and keeps the extracted
problems (plain data); ``time_solve`` measures formulation plus HiGHS. Goals on two CPU
cores: 5 s at ViT-S size, 60 s at 10,000 operators. The two largest graphs take about 4 and 24
minutes to lower, so they are benchmarked only with ``LAYOUTBENCH_BENCH_ZOO=full``.
"""

from benchmarks._suites import BENCH_ZOO
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from strategies.ilp import partition_problems, solve
from strategies.ilp_model import formulate
from strategies.objective import TransitionBytes, TransitionCount

OBJECTIVES = {"count": TransitionCount, "bytes": TransitionBytes}  # asv's parameter names

ALL_GRAPHS = (
    "vit_small_patch16_224.unfused",
    "synthetic:1000:1",
    "synthetic:3000:1",
    "synthetic:10000:1",
)
GRAPHS = ALL_GRAPHS if BENCH_ZOO == "full" else ALL_GRAPHS[:2]


class IlpScaling:
    params = (GRAPHS, tuple(OBJECTIVES))
    param_names = ("graph", "objective")
    timeout = 7200
    version = "ilp-scaling-1"

    def setup_cache(self):  # each partition's layout problem, as the ILP pass sees it
        return {graph: partition_problems(vulkan_lowering(pipeline(graph)).programs) for graph in GRAPHS}

    def setup(self, problems, graph, objective):
        self.problems = problems[graph]

    def _objectives(self, objective: str):
        return (OBJECTIVES[objective](problem) for problem in self.problems)

    def time_solve(self, problems, graph, objective):
        for problem in self._objectives(objective):
            solve(problem)

    peakmem_solve = time_solve  # the same solves: their peak memory

    def track_variables(self, problems, graph, objective):
        return sum(formulate(p).variables for p in self._objectives(objective))

    track_variables.unit = "variables"

    def track_constraints(self, problems, graph, objective):
        return sum(formulate(p).constraints for p in self._objectives(objective))

    track_constraints.unit = "constraints"

    def track_proven_optimal(self, problems, graph, objective):
        return int(all(solve(p).optimal for p in self._objectives(objective)))

    track_proven_optimal.unit = "bool"
