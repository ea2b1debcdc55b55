"""The ``vgf`` flow: the VGF compile spec (TOSA FP through ``model-converter``); a
single-partition program is run by ``scenario-runner`` with the ML emulation layer on
Vulkan (lavapipe here; ``vgf_host.py`` makes the tools runnable) and compared with eager
PyTorch. The Arm packages are imported inside the functions (see :mod:`harness.targets.arm.tosa`).
"""

import copy
import json
import subprocess
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

import numpy as np

from harness.targets.arm import tosa
from harness.targets.arm.tosa import ArmToolError
from harness.targets.arm.vgf_host import tools
from harness.targets.edge_programs import delegate_payloads
from layoutkit.errors import last_line


def lower_vgf(exported, model_converter: Path):
    """VGF lowering of a copy of ``exported``: (edge manager, VGF payloads, the TOSA
    flatbuffers model-converter was given)."""
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner
    from executorch.backends.arm.vgf import backend
    from executorch.exir import to_edge_transform_and_lower

    flatbuffers: list[bytes] = []
    real_compile = backend.vgf_compile

    def compile_keeping_tosa(tosa_flatbuffer, *args, **kwargs):
        flatbuffers.append(tosa_flatbuffer)
        return real_compile(tosa_flatbuffer, *args, **kwargs)

    # vgf_compile looks for the converter through $MODEL_CONVERTER_PATH, else on PATH: this one is handed to it.
    with (patch.object(backend, "vgf_compile", compile_keeping_tosa),
          patch.object(backend, "require_model_converter_executable", lambda: model_converter)):
        edge_manager = to_edge_transform_and_lower(
            copy.deepcopy(exported), partitioner=[VgfPartitioner(VgfCompileSpec(tosa.TOSA_FP))]
        )
    return edge_manager, delegate_payloads(edge_manager), flatbuffers


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
        raise ArmToolError(f"vgf_dump failed: {last_line(template.stderr)}")
    inputs = [workdir / f"input_{index}.npy" for index in range(len(exported.example_inputs[0]))]
    for path, array in zip(inputs, tosa.numpy_inputs(exported)):
        np.save(path, array)
    outputs = [workdir / f"output_{i}.npy" for i in range(len(tosa.model_eager_outputs(exported)))]
    scenario = workdir / "scenario.json"
    scenario.write_text(json.dumps(_scenario(vgf, json.loads(template.stdout), inputs, outputs)))
    profile = workdir / "profile.json"
    start = time.perf_counter()
    done = subprocess.run(  # in the environment it inherits, with the layers and the driver it needs
        ["env", *(f"{name}={value}" for name, value in vgf_tools.environment.items()), str(vgf_tools.scenario_runner),
         "--scenario", str(scenario), "--output", str(workdir), "--profiling-dump-path", str(profile),
         "--log-level", "error"],
        capture_output=True, text=True, timeout=1800,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise ArmToolError(f"scenario-runner failed: {last_line(done.stderr + done.stdout)}")
    timestamps = json.loads(profile.read_text()).get("Timestamps", [])
    inference = sum(t["Time for command [ms]"] for t in timestamps) / 1000
    return {"setup_seconds": wall - inference, "latency_ms_median": inference * 1000, "iterations": 1,
            **tosa.compare_with_eager([np.load(p) for p in outputs], exported)}


def measure_vgf(exported, driver: Path) -> dict:
    """The VGF flow's fields for ``exported``, its program run on the Vulkan driver whose ICD
    file is ``driver``."""
    tosa.require_arm_packages()
    vgf_tools = tools(driver)
    start = time.perf_counter()
    edge_manager, payloads, flatbuffers = lower_vgf(exported, vgf_tools.model_converter)
    fields = tosa.lowering_fields(start, edge_manager, len(payloads), flatbuffers)
    with tempfile.TemporaryDirectory() as workdir:
        return tosa.with_whole_model_run(fields, payloads, lambda payload: run_vgf(payload, exported, vgf_tools,
                                                                                    Path(workdir)))
