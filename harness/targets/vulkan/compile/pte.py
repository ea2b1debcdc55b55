"""A model's .pte for each strategy, with the program around its delegates emitted once.

``to_executorch`` runs ExecuTorch's passes over the whole edge program (re-tracing every
delegate's original program under fake tensors), emits it into a ``Program`` and
serializes that. Only the delegates' payloads (``backend_delegate_data``) and their named
data (the weights ``VkGraphBuilder`` stores by digest) depend on the layout strategy, so
:meth:`EmittedProgram.emit` runs ``to_executorch`` once per model and keeps the emitter's
output; :meth:`EmittedProgram.serialize` puts one strategy's payloads and named data into
it the way the emitter and ``EdgeProgramManager`` do and hands it to the serializer
``to_executorch`` uses (``serialize_for_executorch``). The result is byte for byte what
``to_executorch`` writes for that strategy (tests check it on every model and strategy).
"""

import copy
from dataclasses import dataclass, replace

from executorch.exir._serialize._cord import Cord
from executorch.exir._serialize._named_data_store import NamedDataStore, NamedDataStoreOutput
from executorch.exir._serialize._serialize import serialize_for_executorch
from executorch.exir.capture._config import ExecutorchBackendConfig
from executorch.exir.emit._emit_program import EmitterOutput
from executorch.exir.schema import BackendDelegateDataReference, BackendDelegateInlineData, DataLocation
from executorch.extension.flat_tensor.serialize.serialize import FlatTensorConfig, FlatTensorSerializer

# The serialization settings of to_executorch() without a configuration, as every .pte here
# is made. (Not handed to to_executorch(): its memory planning pass keeps state between runs.)
CONFIG = ExecutorchBackendConfig()


@dataclass
class EmittedProgram:
    """The emitter's output for a model's edge program, whose delegates carry the reference
    payloads (those preprocess made during partitioning)."""

    emitter_output: EmitterOutput
    data_partitions: list[int]  # the partition of each backend_delegate_data entry

    @classmethod
    def emit(cls, edge_manager, partition_of_payload) -> "EmittedProgram":
        """``edge_manager`` (left as it is) to ExecuTorch; ``partition_of_payload`` maps a
        reference payload to the index of its partition."""
        # to_executorch() rewrites the edge program it is given.
        manager = copy.deepcopy(edge_manager).to_executorch()
        output = manager._emitter_output  # ExecuTorch 1.5.1 keeps it only here
        partitions = [partition_of_payload(entry.data) for entry in output.program.backend_delegate_data]
        return cls(output, partitions)

    def serialize(self, payloads: list[bytes], data_stores: list[NamedDataStoreOutput | None],
                  call_order: list[int]) -> Cord:
        """The .pte whose delegates carry ``payloads`` and ``data_stores`` (one per
        partition); ``call_order``: partition indices in the order the program calls them,
        the order ``EdgeProgramManager`` collects their named data in."""
        named = NamedDataStore()
        for index in call_order:
            if data_stores[index] is not None:
                named.merge_named_data_store(data_stores[index])
        program = _with_payloads(self.emitter_output.program, [payloads[p] for p in self.data_partitions])
        # The serializer needs the data serializer only for external data (.ptd), which has none here.
        pte, _ = serialize_for_executorch(
            replace(self.emitter_output, program=program), CONFIG,
            FlatTensorSerializer(FlatTensorConfig(segment_alignment=CONFIG.segment_alignment)),
            named.get_named_data_store_output(),
        )
        return pte


def _with_payloads(program, entry_payloads: list[bytes]):
    """A copy of ``program`` whose backend_delegate_data entry ``i`` is now
    ``entry_payloads[i]``, one entry per distinct payload in the order of first use, as the
    emitter lays them out (two partitions may agree under one strategy and not another)."""
    program = copy.deepcopy(program)
    index_of: dict[bytes, int] = {}
    for plan in program.execution_plan:
        for delegate in plan.delegates:
            index = index_of.setdefault(entry_payloads[delegate.processed.index], len(index_of))
            delegate.processed = BackendDelegateDataReference(location=DataLocation.INLINE, index=index)
    program.backend_delegate_data = [BackendDelegateInlineData(data=payload) for payload in index_of]
    return program
