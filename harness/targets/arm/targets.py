"""The Arm targets: ``tosa``, ``ethos-u55-128``, ``ethos-u85-256`` and ``vgf``.

Arm's backends have no pluggable layout pass: each model is measured once per target,
with no strategy; the layout figure is the TRANSPOSEs that survive in the TOSA graph.
"""

import models
from harness.errors import UnavailableError
from harness.targets.arm.ethos_u import measure_ethos_u
from harness.targets.arm.tosa import measure_tosa
from harness.targets.arm.vgf import measure_vgf
from harness.targets.arm.vgf_host import icd
from harness.targets.base import MeasureContext, Target, register_target

TOSA_METRICS = ("partitions", "ops_outside_delegate", "tosa_ops", "transposes", "transpose_bytes", "lowering_seconds")
RUN_METRICS = ("latency_ms_median", "max_abs_error", "error_tolerance", "top1_match")


class ArmTarget(Target):
    """A target whose flow measures an exported program as the Arm backend lowers it."""

    uses_strategies = False

    def flow(self, exported, context: MeasureContext) -> dict:
        raise NotImplementedError

    def measure(self, model, strategy, fields: dict, context: MeasureContext) -> None:
        if models.half_precision(model.name):
            raise UnavailableError(f"{self.name} has no half-precision option: {models.FP16_SUFFIX} is ET-VK's "
                                   "force_fp16; measure the model without it")
        fields.update(self.flow(model.exported, context))


@register_target("tosa")
class Tosa(ArmTarget):
    """TOSA FP: operator and TRANSPOSE counts; a whole-model graph run by the TOSA reference model."""

    metrics = (*TOSA_METRICS, *RUN_METRICS)
    tools = (*ArmTarget.tools, "tosa-tools")
    runs_programs = True  # the TOSA reference model

    def flow(self, exported, context: MeasureContext) -> dict:
        return measure_tosa(exported)


class EthosU(ArmTarget):
    """INT8 Ethos-U lowering and Vela's performance and memory estimate for this configuration."""

    metrics = (*TOSA_METRICS, "cycles", "inferences_per_second", "sram_bytes", "offchip_bytes",
               "transpose_cycle_share", "core_clock_hz")
    tools = (*ArmTarget.tools, "tosa-tools", "ethos-u-vela")

    def flow(self, exported, context: MeasureContext) -> dict:
        return measure_ethos_u(exported, self.name)


@register_target("ethos-u55-128")
class EthosU55(EthosU):
    """Ethos-U55, 128 MACs per cycle (Vela's default system configuration)."""


@register_target("ethos-u85-256")
class EthosU85(EthosU):
    """Ethos-U85, 256 MACs per cycle."""


@register_target("vgf")
class Vgf(ArmTarget):
    """VGF through the Arm ML SDK: a whole-model program run on Vulkan by the scenario runner."""

    metrics = (*TOSA_METRICS, *RUN_METRICS, "setup_seconds")
    tools = (*ArmTarget.tools, "tosa-tools", "ai-ml-sdk-model-converter", "ai-ml-sdk-scenario-runner",
             "ai-ml-emulation-layer-for-vulkan", "ai-ml-sdk-vgf-library")
    runs_programs = True

    def environment(self, context: MeasureContext) -> dict:
        """The Vulkan driver the scenario runner uses too."""
        return {**super().environment(context), "vulkan_icd": str(icd(context.host.vulkan_icd))}

    def flow(self, exported, context: MeasureContext) -> dict:
        return measure_vgf(exported, icd(context.host.vulkan_icd))
