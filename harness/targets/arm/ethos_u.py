"""The Ethos-U flows (``ethos-u55-128``, ``ethos-u85-256``): INT8 per-channel symmetric
quantization with the Arm quantizer, Ethos-U lowering, and Vela's performance estimate per
partition (summary and per-layer CSVs, read from a directory of our own per partition).
The Arm packages are imported inside the functions (see :mod:`harness.targets.arm.tosa`).
"""

import contextlib
import copy
import io
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

import torch

from harness.targets.arm.tosa import ArmToolError, lowering_fields, require_arm_packages


def quantize_int8(exported, quantizer) -> torch.export.ExportedProgram:
    """INT8 per-channel symmetric post-training quantization, calibrated on the example input."""
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    inputs = exported.example_inputs[0]
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    # torch 2.13 exports a _guards_fn call_module that prepare_pt2e cannot handle.
    prepared = prepare_pt2e(copy.deepcopy(exported).module(check_guards=False), quantizer)
    prepared(*inputs)
    return torch.export.export(convert_pt2e(prepared), inputs)


@contextlib.contextmanager
def _vela_per_partition(root: Path, tosa_flatbuffers: list, vela_output: io.StringIO):
    """While active, each Vela compilation writes its CSVs to ``root/partition_<i>`` and
    its console report to ``vela_output``; the INT8 TOSA graphs handed to Vela are kept."""
    from executorch.backends.arm.ethosu import backend

    real_compile = backend.vela_compile

    def compile_partition(flatbuffer, args, verbose=False, intermediate_path=None, block_placements=None):
        directory = root / f"partition_{len(tosa_flatbuffers)}"
        directory.mkdir(parents=True)
        tosa_flatbuffers.append(flatbuffer)
        with contextlib.redirect_stdout(vela_output):
            return real_compile(flatbuffer, list(args), False, str(directory), block_placements)

    with patch.object(backend, "vela_compile", compile_partition):
        yield


def _vela_failure(error: Exception, report: str) -> ArmToolError:
    """Vela's own words: its last error line, else the exception's."""
    lines = [line.strip() for line in (report + "\n" + str(error)).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "could not" in line.lower()]
    message = (errors or lines or [type(error).__name__])[-1]
    return ArmToolError(f"Vela rejected the model: {message}")


def vela_estimates(partition_dirs: list[Path]) -> dict:
    """Cycles, inferences/s, memory and the transpose share of cycles, summed over partitions."""
    import pandas as pd  # here, not at the top: every sweep imports the targets, few read Vela's CSVs

    summaries, layers = [], []
    for directory in partition_dirs:
        summary = list((directory / "output").glob("out_summary_*.csv"))
        per_layer = directory / "output" / "out_per-layer.csv"
        if not summary or not per_layer.exists():
            raise ArmToolError(f"Vela wrote no summary/per-layer CSV in {directory / 'output'}")
        summaries.append(pd.read_csv(summary[0]).iloc[0])
        layers.append(pd.read_csv(per_layer, skipinitialspace=True))
    summary, per_layer = pd.DataFrame(summaries), pd.concat(layers)
    cycles = float(summary["cycles_total"].sum())
    seconds = float(summary["inference_time"].sum())
    kib = 1024
    transpose_cycles = per_layer.loc[per_layer["NNG Operator"].str.strip() == "Transpose", "Op Cycles"].sum()
    return {
        "cycles": cycles,
        "inferences_per_second": 1.0 / seconds if seconds else None,
        "sram_bytes": float(summary["sram_memory_used"].max()) * kib,
        "offchip_bytes": float((summary["off_chip_flash_memory_used"] + summary["dram_memory_used"]).sum()) * kib,
        "transpose_cycle_share": float(transpose_cycles) / float(per_layer["Op Cycles"].sum()),
        "core_clock_hz": float(summary["core_clock"].iloc[0]),
    }


def measure_ethos_u(exported, target: str) -> dict:
    require_arm_packages()
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import EthosUQuantizer
    from executorch.exir import to_edge_transform_and_lower

    compile_spec = EthosUCompileSpec(target, extra_flags=["--verbose-performance"])
    start = time.perf_counter()
    quantized = quantize_int8(exported, EthosUQuantizer(compile_spec))
    flatbuffers: list[bytes] = []
    report = io.StringIO()
    with tempfile.TemporaryDirectory() as workdir, _vela_per_partition(Path(workdir), flatbuffers, report):
        try:
            edge_manager = to_edge_transform_and_lower(quantized, partitioner=[EthosUPartitioner(compile_spec)])
        except Exception as error:
            raise _vela_failure(error, report.getvalue()) from error
        estimates = vela_estimates(sorted(Path(workdir).glob("partition_*")))
    return {**lowering_fields(start, edge_manager, len(flatbuffers), flatbuffers), **estimates}
