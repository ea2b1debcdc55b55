"""A stand-in for ExecuTorch's ``executor_runner`` with the same flags, running the program
through the pip pybindings, so the harness's executor_runner driver is exercised where no
runtime was built. Writes outputs as ``<output_file>-<index>.bin`` raw bytes, like the real one.
Each inference also takes :data:`INFERENCE_SECONDS`, as a model on a GPU would: the harness
times inferences from outside, as differences between runner processes, and a tiny CPU
program would vanish in the Python start-up's noise (the harness then fails the run)."""

import argparse
import sys
import time
from pathlib import Path

import torch
from executorch.runtime import Runtime

INFERENCE_SECONDS = 0.25


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_path", required=True)
    parser.add_argument("--inputs", default="")
    parser.add_argument("--num_executions", type=int, default=1)
    parser.add_argument("--output_file", default="")
    parser.add_argument("--print_output", default="summary")
    parser.add_argument("--etdump_path", default="model.etdump")
    args = parser.parse_args(argv)
    method = Runtime.get().load_program(Path(args.model_path)).load_method("forward")
    inputs = []
    for index, path in enumerate(args.inputs.split(",") if args.inputs else []):
        meta = method.metadata.input_tensor_meta(index)
        data = bytearray(Path(path).read_bytes())
        inputs.append(torch.frombuffer(data, dtype=torch.float32).reshape(tuple(meta.sizes())))
    for _ in range(args.num_executions):
        outputs = method.execute(inputs)
        time.sleep(INFERENCE_SECONDS)
    if args.output_file:
        for index, output in enumerate(outputs):
            Path(f"{args.output_file}-{index}.bin").write_bytes(output.contiguous().numpy().tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
