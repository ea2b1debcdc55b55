"""Child process of :class:`harness.targets.vulkan.local.runners.Pybindings`: load a .pte with ExecuTorch's Python
runtime, run warm-up and timed inferences, save latencies, outputs and the ETDump.

``python -m harness.targets.vulkan.local.pybindings_worker PTE WORKDIR WARMUP ITERATIONS``; reads
``WORKDIR/inputs.pt``, writes ``WORKDIR/result.pt`` and ``WORKDIR/model.etdump``.
"""

import sys
import time
from pathlib import Path

import torch
from executorch.runtime import Runtime


def main(pte: str, workdir: str, warmup: str, iterations: str) -> None:
    work = Path(workdir)
    inputs = torch.load(work / "inputs.pt")
    program = Runtime.get().load_program(Path(pte), enable_etdump=True)
    method = program.load_method("forward")
    for _ in range(int(warmup)):
        method.execute(inputs)
    latencies = []
    for _ in range(int(iterations)):
        start = time.perf_counter()
        outputs = method.execute(inputs)
        latencies.append((time.perf_counter() - start) * 1000)
    program.write_etdump_result_to_file(str(work / "model.etdump"), str(work / "model.debug"))
    torch.save({"latencies_ms": latencies, "outputs": [o.clone() for o in outputs]}, work / "result.pt")


if __name__ == "__main__":
    main(*sys.argv[1:])
