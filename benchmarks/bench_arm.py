"""asv suite: what the Arm backend's layout handling leaves on each Arm target.

``setup_cache`` runs every (model, target) once (the INT8 Ethos-U flows are the slow
part: 15-30 s per model here, minutes for a full ViT); the ``track_`` benchmarks read
its records. A model a target rejects (Vela on Ethos-U55 and ViT transposes) is skipped
with the tool's message.
"""

from asv_runner.benchmarks.mark import skip_for_params

from benchmarks._suites import BENCH_MODELS, RecordedSuite, track
from harness.targets import get_target, list_targets

ARM_TARGETS = [name for name in list_targets() if not get_target(name).uses_strategies]
# Vela estimates exist on the Ethos-U targets only; asv skips the other pairs before setup.
NO_VELA = [(model, target) for model in BENCH_MODELS for target in ARM_TARGETS
           if "cycles" not in get_target(target).metrics]


class ArmTargets(RecordedSuite):
    params = (BENCH_MODELS, ARM_TARGETS)
    param_names = ("model", "target")
    version = "arm-targets-1"

    def setup_cache(self):
        return self.sweep()

    track_transposes = track("transposes")
    track_transpose_bytes = track("transpose_bytes")
    track_vela_cycles = skip_for_params(NO_VELA)(track("cycles"))
    track_transpose_cycle_share = skip_for_params(NO_VELA)(track("transpose_cycle_share"))
