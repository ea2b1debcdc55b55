"""The Arm backend's TOSA flow, and what every Arm flow shares.

On Arm the layout problem is NCHW vs NHWC: ExecuTorch 1.5.1's Arm backend wraps convolutions,
pooling and upsampling in explicit permutes and cancels what it can; the Arm analogue of a
transition is a TRANSPOSE that survives in the TOSA graph. That backend has no pluggable layout
pass, so Arm records carry no strategy (``targets.py`` registers the four targets on the flows of
this module, :mod:`~harness.targets.arm.ethos_u` and :mod:`~harness.targets.arm.vgf`).

``tosa``: ``TosaCompileSpec("TOSA-1.0+FP")`` + ``TOSAPartitioner``; TOSA operator and TRANSPOSE
counts and the bytes the transposes write; a single-partition model is also run by
``tosa_reference_model`` and compared with eager PyTorch. Every Arm flow counts the TRANSPOSEs of
the TOSA graphs it compiled (:func:`tosa_statistics`), captured where the backend hands them on.

The Arm packages (ExecuTorch's Arm backend, tosa-tools, Vela) are imported inside the functions,
so the rest of the harness works where they are not installed.
"""

import copy
import math
import time

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


def require_arm_packages() -> None:
    try:
        import tosa_serializer  # noqa: F401
        import ethosu.vela  # noqa: F401
    except ImportError:
        raise TargetUnavailableError(MISSING_PACKAGES) from None


def model_eager_outputs(exported) -> list[torch.Tensor]:
    return eager_outputs(exported.module(), exported.example_inputs[0])


def numpy_inputs(exported) -> list[np.ndarray]:
    return [np.ascontiguousarray(t.detach().numpy()) for t in exported.example_inputs[0]]


def lowering_fields(start: float, edge_manager, partitions: int, flatbuffers: list[bytes]) -> dict:
    """What every Arm flow records of a lowering begun at ``start`` (``time.perf_counter``)."""
    return {"lowering_seconds": time.perf_counter() - start, "partitions": partitions,
            "ops_outside_delegate": len(cpu_ops(edge_manager)), **tosa_statistics(flatbuffers)}


def with_whole_model_run(fields: dict, payloads: list[bytes], run) -> dict:
    """``fields`` and ``run(payload)``'s where the delegate is the whole model, so it can run on
    the model's inputs alone."""
    if len(payloads) == 1 and fields["ops_outside_delegate"] == 0:
        return {**fields, **run(payloads[0])}
    return {**fields, "run_note": "not run: the model is not one partition without CPU ops"}


def tosa_statistics(flatbuffers: list[bytes]) -> dict:
    """Operators, TRANSPOSEs and the bytes the TRANSPOSEs write, over TOSA flatbuffers."""
    from tosa.DType import DType
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph

    dtype_names = {value: name for name, value in vars(DType).items() if not name.startswith("_")}
    operators = transposes = transpose_bytes = 0
    for flatbuffer in flatbuffers:
        graph = TosaGraph.GetRootAs(flatbuffer, 0)
        for region in (graph.Regions(r) for r in range(graph.RegionsLength())):
            for block in (region.Blocks(b) for b in range(region.BlocksLength())):
                tensors = {block.Tensors(t).Name(): block.Tensors(t) for t in range(block.TensorsLength())}
                for op in (block.Operators(o) for o in range(block.OperatorsLength())):
                    operators += 1
                    if op.Op() != Op.TRANSPOSE:
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
    outputs, status = tosa_reference_model.run(flatbuffer, numpy_inputs(exported),
                                               initialize_variable_tensor_from_numpy=1)
    seconds = time.perf_counter() - start
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise ArmToolError(f"the TOSA reference model rejected the graph ({status.name})")
    return {"latency_ms_median": seconds * 1000, "iterations": 1, **compare_with_eager(outputs, exported)}


def compare_with_eager(outputs: list, exported) -> dict:
    """The max abs error against eager PyTorch, its tolerance, and (for a classifier's logits)
    whether the top-1 class agrees."""
    reference = model_eager_outputs(exported)
    if len(outputs) != len(reference):
        raise ArmToolError(f"the program gave {len(outputs)} outputs, eager PyTorch {len(reference)}")
    produced = [torch.from_numpy(np.asarray(o)).reshape(r.shape) for o, r in zip(outputs, reference)]
    return {"max_abs_error": max_abs_error(produced, reference), "error_tolerance": tolerance(reference),
            "top1_match": top1_match(produced, reference)}


def measure_tosa(exported) -> dict:
    require_arm_packages()
    start = time.perf_counter()
    edge_manager, flatbuffers = lower_tosa(exported)
    fields = lowering_fields(start, edge_manager, len(flatbuffers), flatbuffers)
    return with_whole_model_run(fields, flatbuffers, lambda flatbuffer: reference_run(flatbuffer, exported))
