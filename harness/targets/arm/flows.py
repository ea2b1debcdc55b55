"""Arm flows: TOSA FP graphs (+ the TOSA reference model) and Ethos-U estimates from Vela.

On Arm the layout problem is NCHW vs NHWC: ExecuTorch 1.5.1's Arm backend wraps
convolutions, pooling and upsampling in explicit permutes and cancels what it can; the
Arm analogue of a transition is a TRANSPOSE that survives in the TOSA graph. That
backend has no pluggable layout pass, so Arm records carry no strategy (``targets.py``
registers the four targets on these flows).

- ``tosa``: ``TosaCompileSpec("TOSA-1.0+FP")`` + ``TOSAPartitioner``; TOSA operator and
  TRANSPOSE counts and the bytes the transposes write; a single-partition model is also
  run by ``tosa_reference_model`` and compared with eager PyTorch.
- ``ethos-u55-128``, ``ethos-u85-256``: INT8 per-channel symmetric quantization with the
  Arm quantizer, Ethos-U lowering, and Vela's performance estimate per partition (summary
  and per-layer CSVs, read from a directory of our own per partition).
- ``vgf``: the VGF compile spec (TOSA FP through ``model-converter``); a single-partition
  program is run by ``scenario-runner`` with the ML emulation layer on Vulkan (lavapipe
  here; ``vgf_host.py`` makes the tools runnable) and compared with eager PyTorch.

Every target also counts the TRANSPOSEs of the TOSA graphs it compiled (FP for tosa and
vgf, INT8 for Ethos-U), captured where the backend hands them to the next tool.

The Arm packages (ExecuTorch's Arm backend, tosa-tools, Vela) are imported inside the
functions, so the rest of the harness works where they are not installed.
"""

import contextlib
import copy
import io
import json
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from harness.errors import MeasurementError, TargetUnavailableError
from harness.targets.accuracy import eager_outputs, max_abs_error, tolerance, top1_match
from harness.targets.edge_programs import cpu_ops, delegate_payloads

TOSA_FP = "TOSA-1.0+FP"
MISSING_PACKAGES = "the Arm targets need tosa-tools and ethos-u-vela; run make (it installs them into .venv)"
# Bits per element of TOSA's DType names (tosa/DType.py); SHAPE values are 64-bit.
_DTYPE_BITS = {
    "BOOL": 8, "INT4": 4, "INT8": 8, "INT16": 16, "INT32": 32, "INT48": 48, "INT64": 64, "SHAPE": 64,
    "FP32": 32, "FP16": 16, "BF16": 16, "FP8E4M3": 8, "FP8E5M2": 8, "FP6E2M3": 6, "FP6E3M2": 6,
    "FP4E2M1": 4, "FP8UE8M0": 8, "MXINT8": 8,
}


class ArmToolError(MeasurementError):
    """An Arm tool (the TOSA reference model, Vela) rejected or failed on a model."""


def _require_arm_packages() -> None:
    try:
        import tosa_serializer  # noqa: F401
        import ethosu.vela  # noqa: F401
    except ImportError:
        raise TargetUnavailableError(MISSING_PACKAGES) from None


@contextlib.contextmanager
def _substituted(module, name: str, make_replacement):
    """While active, ``module.name`` is ``make_replacement(original)``."""
    original = getattr(module, name)
    setattr(module, name, make_replacement(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def _eager_outputs(exported) -> list[torch.Tensor]:
    return eager_outputs(exported.module(), exported.example_inputs[0])


def _numpy_inputs(exported) -> list[np.ndarray]:
    return [np.ascontiguousarray(t.detach().numpy()) for t in exported.example_inputs[0]]


def _single_program(flatbuffers: list, cpu_ops: int) -> bool:
    """Whether the delegate is the whole model, so it can run on the model's inputs alone."""
    return len(flatbuffers) == 1 and cpu_ops == 0


NOT_WHOLE_MODEL = "not run: the model is not one partition without CPU ops"


def _names(enum_class) -> dict[int, str]:
    return {value: name for name, value in vars(enum_class).items() if not name.startswith("_")}


def tosa_statistics(flatbuffers: list[bytes]) -> dict:
    """Operators, TRANSPOSEs and the bytes the TRANSPOSEs write, over TOSA flatbuffers."""
    from tosa.DType import DType
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph

    op_names, dtype_names = _names(Op), _names(DType)
    operators = transposes = transpose_bytes = 0
    for flatbuffer in flatbuffers:
        graph = TosaGraph.GetRootAs(flatbuffer, 0)
        for region in (graph.Regions(r) for r in range(graph.RegionsLength())):
            for block in (region.Blocks(b) for b in range(region.BlocksLength())):
                tensors = {block.Tensors(t).Name(): block.Tensors(t) for t in range(block.TensorsLength())}
                for op in (block.Operators(o) for o in range(block.OperatorsLength())):
                    operators += 1
                    if op_names[op.Op()] != "TRANSPOSE":
                        continue
                    transposes += 1
                    output = tensors[op.Outputs(0)]
                    elements = math.prod(int(d) for d in output.ShapeAsNumpy())
                    transpose_bytes += elements * _DTYPE_BITS[dtype_names[output.Type()]] // 8
    return {"tosa_ops": operators, "transposes": transposes, "transpose_bytes": transpose_bytes}


def lower_tosa(exported):
    """TOSA FP lowering of a copy of ``exported``: (edge manager, TOSA flatbuffers)."""
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    partitioner = TOSAPartitioner(TosaCompileSpec(TOSA_FP))
    edge_manager = to_edge_transform_and_lower(copy.deepcopy(exported), partitioner=[partitioner])
    return edge_manager, delegate_payloads(edge_manager)


def reference_run(flatbuffer: bytes, exported) -> dict:
    """Run a whole-model TOSA graph with the reference model on the example input and
    compare with the exported program run eagerly."""
    import tosa_reference_model

    start = time.perf_counter()
    outputs, status = tosa_reference_model.run(flatbuffer, _numpy_inputs(exported),
                                               initialize_variable_tensor_from_numpy=1)
    seconds = time.perf_counter() - start
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise ArmToolError(f"the TOSA reference model rejected the graph ({status.name})")
    error, limit, top1 = _compare_with_eager(outputs, exported)
    return {"latency_ms_median": seconds * 1000, "iterations": 1, "max_abs_error": error,
            "error_tolerance": limit, "top1_match": top1}


def _compare_with_eager(outputs: list, exported) -> tuple[float, float, bool | None]:
    """Max abs error against eager PyTorch, its tolerance, and (for a classifier's logits)
    whether the top-1 class agrees."""
    reference = _eager_outputs(exported)
    if len(outputs) != len(reference):
        raise ArmToolError(f"the program gave {len(outputs)} outputs, eager PyTorch {len(reference)}")
    produced = [torch.from_numpy(np.asarray(o)).reshape(r.shape) for o, r in zip(outputs, reference)]
    return max_abs_error(produced, reference), tolerance(reference), top1_match(produced, reference)


def measure_tosa(exported) -> dict:
    _require_arm_packages()
    start = time.perf_counter()
    edge_manager, flatbuffers = lower_tosa(exported)
    fields = {
        "lowering_seconds": time.perf_counter() - start,
        "partitions": len(flatbuffers),
        "ops_outside_delegate": len(cpu_ops(edge_manager)),
        **tosa_statistics(flatbuffers),
    }
    if _single_program(flatbuffers, fields["ops_outside_delegate"]):
        fields.update(reference_run(flatbuffers[0], exported))
    else:
        fields["run_note"] = NOT_WHOLE_MODEL
    return fields


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

    def per_partition(real_compile):
        def compile_partition(flatbuffer, args, verbose=False, intermediate_path=None, block_placements=None):
            directory = root / f"partition_{len(tosa_flatbuffers)}"
            directory.mkdir(parents=True)
            tosa_flatbuffers.append(flatbuffer)
            with contextlib.redirect_stdout(vela_output):
                return real_compile(flatbuffer, list(args), False, str(directory), block_placements)

        return compile_partition

    with _substituted(backend, "vela_compile", per_partition):
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
    _require_arm_packages()
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
    return {
        "lowering_seconds": time.perf_counter() - start,
        "partitions": len(flatbuffers),
        "ops_outside_delegate": len(cpu_ops(edge_manager)),
        **tosa_statistics(flatbuffers),
        **estimates,
    }


def lower_vgf(exported, model_converter: Path):
    """VGF lowering of a copy of ``exported``: (edge manager, VGF payloads, the TOSA
    flatbuffers model-converter was given)."""
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
    from executorch.backends.arm.vgf import backend
    from executorch.exir import to_edge_transform_and_lower

    flatbuffers: list[bytes] = []

    def keeping_tosa(real_compile):
        def compile_partition(tosa_flatbuffer, *args, **kwargs):
            flatbuffers.append(tosa_flatbuffer)
            return real_compile(tosa_flatbuffer, *args, **kwargs)

        return compile_partition

    converter = {"MODEL_CONVERTER_PATH": str(model_converter)}
    with _substituted(backend, "vgf_compile", keeping_tosa), _environment(converter):
        edge_manager = to_edge_transform_and_lower(
            copy.deepcopy(exported), partitioner=[VgfPartitioner(VgfCompileSpec(TOSA_FP))]
        )
    return edge_manager, delegate_payloads(edge_manager), flatbuffers


@contextlib.contextmanager
def _environment(values: dict):
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


def _scenario(vgf: Path, template: dict, inputs: list[Path], outputs: list[Path]) -> dict:
    """vgf_dump's scenario template with this run's files filled in."""
    slots = {f"TEMPLATE_PATH_TENSOR_INPUT_{i}": str(p) for i, p in enumerate(inputs)}
    slots |= {f"TEMPLATE_PATH_TENSOR_OUTPUT_{i}": str(p) for i, p in enumerate(outputs)}
    for resource in template["resources"]:
        if "graph" in resource:
            resource["graph"]["src"] = str(vgf)
        for key in ("src", "dst"):
            placeholder = resource.get("tensor", {}).get(key)
            if placeholder is not None:
                if placeholder not in slots:
                    raise ArmToolError(f"unexpected scenario template slot {placeholder}")
                resource["tensor"][key] = slots[placeholder]
    return template


def run_vgf(payload: bytes, exported, vgf_tools, workdir: Path) -> dict:
    """Run a whole-model VGF program with scenario-runner; wall time split into set-up and
    the graph dispatch (from the runner's profiling dump), and the error against eager."""
    vgf = workdir / "model.vgf"
    vgf.write_bytes(payload)
    template = subprocess.run([str(vgf_tools.vgf_dump), "-i", str(vgf), "--scenario-template"],
                              capture_output=True, text=True, timeout=300)
    if template.returncode != 0:
        raise ArmToolError(f"vgf_dump failed: {_last_line(template.stderr)}")
    inputs = []
    for index, array in enumerate(_numpy_inputs(exported)):
        inputs.append(workdir / f"input_{index}.npy")
        np.save(inputs[-1], array)
    outputs = [workdir / f"output_{i}.npy" for i in range(len(_eager_outputs(exported)))]
    scenario = workdir / "scenario.json"
    scenario.write_text(json.dumps(_scenario(vgf, json.loads(template.stdout), inputs, outputs)))
    profile = workdir / "profile.json"
    start = time.perf_counter()
    done = subprocess.run(
        [str(vgf_tools.scenario_runner), "--scenario", str(scenario), "--output", str(workdir),
         "--profiling-dump-path", str(profile), "--log-level", "error"],
        capture_output=True, text=True, timeout=1800, env={**os.environ, **vgf_tools.environment},
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise ArmToolError(f"scenario-runner failed: {_last_line(done.stderr + done.stdout)}")
    timestamps = json.loads(profile.read_text()).get("Timestamps", [])
    inference = sum(t["Time for command [ms]"] for t in timestamps) / 1000
    error, limit, top1 = _compare_with_eager([np.load(p) for p in outputs], exported)
    return {"setup_seconds": wall - inference, "latency_ms_median": inference * 1000, "iterations": 1,
            "max_abs_error": error, "error_tolerance": limit, "top1_match": top1}


def measure_vgf(exported) -> dict:
    _require_arm_packages()
    from harness.targets.arm.vgf_host import tools

    vgf_tools = tools()
    start = time.perf_counter()
    edge_manager, payloads, flatbuffers = lower_vgf(exported, vgf_tools.model_converter)
    fields = {
        "lowering_seconds": time.perf_counter() - start,
        "partitions": len(payloads),
        "ops_outside_delegate": len(cpu_ops(edge_manager)),
        **tosa_statistics(flatbuffers),
    }
    if _single_program(payloads, fields["ops_outside_delegate"]):
        with tempfile.TemporaryDirectory() as workdir:
            fields.update(run_vgf(payloads[0], exported, vgf_tools, Path(workdir)))
    else:
        fields["run_note"] = NOT_WHOLE_MODEL
    return fields

