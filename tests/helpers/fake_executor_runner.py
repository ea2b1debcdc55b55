"""A stand-in for ExecuTorch's ``executor_runner`` with the same flags, running the program
through the pip pybindings, so the harness's executor_runner driver is exercised where no
runtime was built. Writes outputs as ``<output_file>-<index>.bin`` raw bytes, like the real one.

Like a runner built with the event tracer, it writes its process's ETDump at
``--etdump_path`` (default ``model.etdump`` in its working directory): the pybindings' own,
with ``Method::init`` and one ``Method::execute`` per execution, all of them, warm-up
included. With ``FAKE_RUNNER_WITHOUT_EVENT_TRACER=1`` in its environment it stands for a
runner built without the event tracer: it has no ``--etdump_path`` flag (the real one exits
on a flag it does not know), writes no ETDump, and each inference also takes
:data:`INFERENCE_SECONDS`, as a model on a GPU would: the harness then times inferences from
outside, as differences between runner processes, and a tiny CPU program would vanish in the
Python start-up's noise (the harness then fails the run). Three seconds the inference: start-ups
that import torch and ExecuTorch vary by two seconds and more while other tests load the
machine (``make test`` runs them on every core), and two more inferences must outlast that.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from executorch.runtime import Runtime

INFERENCE_SECONDS = 3.0
WITHOUT_EVENT_TRACER = "FAKE_RUNNER_WITHOUT_EVENT_TRACER"


def main(argv: list[str]) -> int:
    event_tracer = os.environ.get(WITHOUT_EVENT_TRACER) != "1"
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_path", required=True)
    parser.add_argument("--inputs", default="")
    parser.add_argument("--num_executions", type=int, default=1)
    parser.add_argument("--output_file", default="")
    parser.add_argument("--print_output", default="summary")
    if event_tracer:
        parser.add_argument("--etdump_path", default="model.etdump")
    args = parser.parse_args(argv)
    program = Runtime.get().load_program(Path(args.model_path), enable_etdump=event_tracer)
    method = program.load_method("forward")
    inputs = []
    for index, path in enumerate(args.inputs.split(",") if args.inputs else []):
        meta = method.metadata.input_tensor_meta(index)
        data = bytearray(Path(path).read_bytes())
        inputs.append(torch.frombuffer(data, dtype=torch.float32).reshape(tuple(meta.sizes())))
    for _ in range(args.num_executions):
        outputs = method.execute(inputs)
        if not event_tracer:
            time.sleep(INFERENCE_SECONDS)
    if args.output_file:
        for index, output in enumerate(outputs):
            Path(f"{args.output_file}-{index}.bin").write_bytes(output.contiguous().numpy().tobytes())
    if event_tracer:
        program.write_etdump_result_to_file(args.etdump_path, f"{args.etdump_path}.debug")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
