"""ET-VK lowering with a layout strategy plugged in, sharing everything before the layout pass.

ExecuTorch's ``VulkanBackend.preprocess`` runs a fixed pipeline per delegated partition
(fusion passes, SpecPropPass, prepacking, **TagMemoryMetaPass**, memory planning,
``VkGraphBuilder``, serialization) with no hook for the layout pass, so we run that very
function with three names of its module substituted for one call:

- ``TagMemoryMetaPass`` builds the strategy's pass (a subclass) with the same arguments;
- ``apply_passes`` records the program handed to the layout pass (the shared *prefix*),
  or, when replaying, hands over a copy of a recorded prefix instead of recomputing it;
- ``VkGraphBuilder`` is kept, so metrics can map graph nodes to serialized values.

Everything else is ExecuTorch's code path, so a strategy's payload is exactly what ExecuTorch
would serialize with that pass. (While a model is partitioned, the fusable patterns' reference
graphs are substituted too: :func:`_pattern_graphs_built_once`.) The model is exported,
partitioned and emitted once (:class:`VulkanLowering`); each strategy costs only the layout
pass and what follows it (:meth:`VulkanLowering.lower`), its .pte only a serialization (:mod:`.pte`).
"""

import contextlib
import copy
import functools
import hashlib
import time
from dataclasses import dataclass
from unittest.mock import patch

import executorch.backends.vulkan.vulkan_preprocess as vulkan_preprocess
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from executorch.backends.vulkan.patterns import fusable_patterns
from executorch.exir import to_edge_transform_and_lower
from executorch.exir._serialize._cord import Cord
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import PreprocessResult
from executorch.exir.program._program import collect_named_data_store_from_exported_program
from torch.export import ExportedProgram

from costmodel.table import CostTable
from harness.errors import LoweringError
from harness.targets.edge_programs import called_delegates, lowered_modules
from harness.targets.vulkan.compile.pte import EmittedProgram
from strategies.priced_layout import construct

_REAL_APPLY_PASSES = vulkan_preprocess.apply_passes
_REAL_GRAPH_BUILDER = vulkan_preprocess.VkGraphBuilder
_REAL_LAYOUT_PASS = vulkan_preprocess.TagMemoryMetaPass
_REAL_PREPROCESS = vulkan_preprocess.VulkanBackend.preprocess.__func__


@dataclass
class PartitionPrefix:
    """One delegated partition as it stands right before the layout pass."""

    program: ExportedProgram
    compile_specs: list
    node_names: frozenset[str]
    reference_digest: str  # of the payload preprocess made: finds the partition's lowered module in the edge program
    layout_pass_arguments: tuple  # (args, kwargs) preprocess built its layout pass with

    def layout_pass_input(self, layout_pass_cls: type, costs: CostTable | None = None
                          ) -> tuple[TagMemoryMetaPass, ExportedProgram]:
        """A strategy's pass built as preprocess builds it, and a fresh copy of the program it runs on."""
        args, kwargs = self.layout_pass_arguments
        return construct(layout_pass_cls, args, kwargs, costs), independent_copy(self.program)


def run_layout_pass(layout_pass: TagMemoryMetaPass, program: ExportedProgram) -> ExportedProgram:
    """The layout pass alone, applied the way preprocess applies it."""
    return _REAL_APPLY_PASSES(program, [layout_pass])


@dataclass
class LoweredPartition:
    """One partition finished by a strategy: tagged, planned and serialized."""

    program: ExportedProgram
    layout_pass: TagMemoryMetaPass
    builder: object  # the VkGraphBuilder that serialized ``program``
    result: PreprocessResult
    prefix_node_names: frozenset[str]
    pass_seconds: float

    @property
    def texture_limits(self):
        return self.layout_pass.texture_limits


def payload_digest(payload: bytes) -> str:
    """What stands for a delegate's payload (a copy of its weights) where only its identity is needed."""
    return hashlib.sha256(payload).hexdigest()


def partition_index(prefixes: list[PartitionPrefix], reference_payload: bytes) -> int:
    """The index of the partition whose payload during partitioning was ``reference_payload``."""
    digest = payload_digest(reference_payload)
    return next(i for i, prefix in enumerate(prefixes) if prefix.reference_digest == digest)


def independent_copy(program: ExportedProgram) -> ExportedProgram:
    """A deep copy whose nodes share no TensorSpec with ``program``: ``copy.deepcopy`` of a
    graph copies each node's ``meta`` shallowly, and the layout pass and memory planning write
    onto its specs (representation, lifetime, memory ids), which would leak from one strategy
    into the next. One memo keeps specs that nodes share (aliases) shared in the copy."""
    duplicate = copy.deepcopy(program)
    memo: dict = {}
    for node in duplicate.graph.nodes:
        if "spec" in node.meta:
            node.meta["spec"] = copy.deepcopy(node.meta["spec"], memo)
    return duplicate


class _PreprocessRun:
    """The substitutions for one ``VulkanBackend.preprocess`` call, and what it observed."""

    def __init__(self, layout_pass_cls: type, costs: CostTable | None, prefix: ExportedProgram | None = None):
        self.layout_pass_cls = layout_pass_cls
        self.costs = costs
        self.prefix = prefix
        self.recorded_prefix: ExportedProgram | None = None
        self.layout_pass: TagMemoryMetaPass | None = None
        self.builder = None
        self.layout_pass_arguments: tuple = ((), {})
        self.pass_seconds = 0.0
        self._prefix_handed_over = False

    def _make_layout_pass(self, *args, **kwargs):
        self.layout_pass_arguments = (args, kwargs)
        layout_pass = construct(self.layout_pass_cls, args, kwargs, self.costs)
        run_pass = layout_pass.call

        def timed_call(graph_module):
            start = time.perf_counter()
            try:
                return run_pass(graph_module)
            finally:
                self.pass_seconds += time.perf_counter() - start

        layout_pass.call = timed_call
        self.layout_pass = layout_pass
        return layout_pass

    def _apply_passes(self, program, passes):
        if self.layout_pass is not None and any(p is self.layout_pass for p in passes):
            if self.prefix is None:
                self.recorded_prefix = independent_copy(program)
            return _REAL_APPLY_PASSES(program, passes)
        if self.prefix is not None and self.layout_pass is None:
            # Replaying: the recorded prefix is the result of every pass group before
            # the layout pass, so the first group returns it and the others pass it on.
            if not self._prefix_handed_over:
                self._prefix_handed_over = True
                return independent_copy(self.prefix)
            return program
        return _REAL_APPLY_PASSES(program, passes)

    def _make_builder(self, *args, **kwargs):
        self.builder = _REAL_GRAPH_BUILDER(*args, **kwargs)
        return self.builder

    def preprocess(self, program: ExportedProgram, compile_specs: list) -> PreprocessResult:
        """ExecuTorch's own ``VulkanBackend.preprocess``, with the substitutions in place."""
        with patch.multiple(vulkan_preprocess, TagMemoryMetaPass=self._make_layout_pass,
                            apply_passes=self._apply_passes, VkGraphBuilder=self._make_builder):
            return _REAL_PREPROCESS(vulkan_preprocess.VulkanBackend, program, compile_specs)


@contextlib.contextmanager
def _recording_preprocess(layout_pass_cls: type, costs: CostTable | None, prefixes: list):
    """While active, every Vulkan preprocess call records its partition's prefix."""

    def recording(cls, program, compile_specs):
        run = _PreprocessRun(layout_pass_cls, costs)
        result = run.preprocess(program, compile_specs)
        if run.recorded_prefix is None:
            raise LoweringError("the Vulkan preprocess ran no layout pass (skip_tag_memory_metadata set?)")
        prefixes.append(PartitionPrefix(run.recorded_prefix, list(compile_specs),
                                        frozenset(n.name for n in run.recorded_prefix.graph.nodes),
                                        payload_digest(result.processed_bytes), run.layout_pass_arguments))
        return result

    with patch.object(vulkan_preprocess.VulkanBackend, "preprocess", classmethod(recording)):
        yield


@functools.cache
def _built_once(get_graphs):
    return functools.cache(get_graphs)


@contextlib.contextmanager
def _pattern_graphs_built_once():
    """While active, each of ET-VK's fusable patterns builds its reference graphs once per process.
    The partitioner and the fusion pass ask on every lowering, and each ask exports two rotary-embedding
    modules to edge: 8 of a small graph's 11 s of lowering. They depend on nothing of the model (fixed
    shapes, random values no match reads), so reusing them changes no byte of any program."""
    with contextlib.ExitStack() as substitutions:
        for entry in fusable_patterns.values():
            if entry.get_graphs_fn is not None:
                substitutions.enter_context(patch.object(entry, "get_graphs_fn", _built_once(entry.get_graphs_fn)))
        yield


@dataclass
class VulkanLowering:
    """A model exported, converted to edge and partitioned for ET-VK once; :meth:`lower`
    finishes every partition with a strategy's layout pass, never recomputing the prefix."""

    edge_manager: object
    prefixes: list[PartitionPrefix]
    prefix_seconds: float  # partitioning and emission
    emitted: EmittedProgram  # the edge program emitted once, for every strategy's .pte
    call_order: list[int]  # partition indices in the order the program calls their delegates

    @property
    def programs(self) -> list[ExportedProgram]:
        """Each partition's program as the layout pass receives it."""
        return [prefix.program for prefix in self.prefixes]

    @classmethod
    def from_exported(cls, exported: ExportedProgram, layout_pass_cls: type = _REAL_LAYOUT_PASS,
                      compile_options: dict | None = None, costs: CostTable | None = None) -> "VulkanLowering":
        """``compile_options``: ET-VK's partitioner options (``force_fp16``), which reach every
        partition's preprocess, the layout pass's constructor included, as compile specs;
        ``costs``: the cost table a pass that prices its choices is constructed with."""
        prefixes: list[PartitionPrefix] = []
        start = time.perf_counter()
        with _recording_preprocess(layout_pass_cls, costs, prefixes), _pattern_graphs_built_once():
            # to_edge consumes its input (e.g. drops non-persistent buffers' constants),
            # so lower a copy and leave the caller's program reusable.
            edge_manager = to_edge_transform_and_lower(copy.deepcopy(exported),
                                                       partitioner=[VulkanPartitioner(compile_options)])
        partition_of = functools.partial(partition_index, prefixes)
        call_order = [partition_of(module.processed_bytes) for module in called_delegates(edge_manager)]
        emitted = EmittedProgram.emit(edge_manager, partition_of)
        return cls(edge_manager, prefixes, time.perf_counter() - start, emitted, call_order)

    def lower(self, layout_pass_cls: type, costs: CostTable | None = None) -> "LoweredProgram":
        """Every partition finished by ``layout_pass_cls`` (constructed with ``costs``)."""
        start = time.perf_counter()
        partitions = []
        for prefix in self.prefixes:
            run = _PreprocessRun(layout_pass_cls, costs, prefix=prefix.program)
            result = run.preprocess(prefix.program, prefix.compile_specs)
            partitions.append(LoweredPartition(run.builder.program, run.layout_pass, run.builder, result,
                                               prefix.node_names, run.pass_seconds))
        return LoweredProgram(self, partitions, time.perf_counter() - start)


@dataclass
class LoweredProgram:
    """Every partition of one model finished by one strategy."""

    lowering: VulkanLowering
    partitions: list[LoweredPartition]
    finish_seconds: float

    @property
    def pass_seconds(self) -> float:
        return sum(p.pass_seconds for p in self.partitions)

    def to_pte(self) -> Cord:
        """The whole program (delegates and CPU fallback) as a .pte: ExecuTorch's Cord,
        joined only by ``bytes()`` or its ``write_to_file``."""
        results = [p.result for p in self.partitions]
        return self.lowering.emitted.serialize([r.processed_bytes for r in results],
                                               [r.data_store_output for r in results], self.lowering.call_order)

    def edge_manager(self):
        """A copy of the shared edge program whose delegates carry this strategy's payloads
        and named data: what ``to_executorch()`` makes the .pte of :meth:`to_pte` from."""
        edge_manager = copy.deepcopy(self.lowering.edge_manager)
        for module in lowered_modules(edge_manager):
            partition = self.partitions[partition_index(self.lowering.prefixes, module.processed_bytes)]
            module._processed_bytes = partition.result.processed_bytes
            module._named_data_store_output = partition.result.data_store_output
            module.meta["debug_handle_map"] = partition.result.debug_handle_map
        # EdgeProgramManager collected the named data of the delegates it was made with.
        edge_manager._named_data_store = NamedDataStore()
        collect_named_data_store_from_exported_program(edge_manager.exported_program(), edge_manager._named_data_store)
        return edge_manager
