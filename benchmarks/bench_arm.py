"""asv suite: what the Arm backend's layout handling leaves on each Arm target.

``setup_cache`` runs every (model, target) once (the INT8 Ethos-U flows are the slow
part: 15-30 s per model here, minutes for a full ViT); the ``track_`` benchmarks read
its records. A model a target rejects (Vela on Ethos-U55 and ViT transposes) is skipped
with the tool's message.
"""

import tempfile

from asv_runner.benchmarks.mark import skip_for_params

from benchmarks._zoo import BENCH_MODELS, RecordedSuite
from harness.arm import ARM_STRATEGY, ARM_TARGETS, ETHOS_U_TARGETS
from harness.records import RecordStore
from harness.sweep import run_sweep

# Vela estimates exist on the Ethos-U targets only; asv skips the other pairs before setup.
NO_VELA = [(model, target) for model in BENCH_MODELS for target in ARM_TARGETS if target not in ETHOS_U_TARGETS]


class ArmTargets(RecordedSuite):
    params = (BENCH_MODELS, ARM_TARGETS)
    param_names = ("model", "target")
    timeout = 3600
    version = "arm-targets-1"

    def setup_cache(self):
        with tempfile.TemporaryDirectory() as results:
            store = RecordStore(results)
            records = [r for t in ARM_TARGETS for r in run_sweep(BENCH_MODELS, [ARM_STRATEGY], t, store, fresh=True)]
        return {(r["model"], r["target"]): r for r in records}

    def track_transposes(self, records, model, target):
        return self.record["transposes"]

    track_transposes.unit = "TRANSPOSE ops"

    def track_transpose_bytes(self, records, model, target):
        return self.record["transpose_bytes"]

    track_transpose_bytes.unit = "bytes"

    @skip_for_params(NO_VELA)
    def track_vela_cycles(self, records, model, target):
        return self.record["cycles"]

    track_vela_cycles.unit = "cycles"

    @skip_for_params(NO_VELA)
    def track_transpose_cycle_share(self, records, model, target):
        return self.record["transpose_cycle_share"]

    track_transpose_cycle_share.unit = "fraction of cycles"
