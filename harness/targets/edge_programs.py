"""What every backend's lowering leaves in an ExecuTorch edge program: its delegates and
the operators no delegate took."""

import operator

from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.graph_module import get_control_flow_submodules
from executorch.exir.lowered_backend_module import LoweredBackendModule

from costmodel.signatures import op_name


def lowered_modules(edge_manager) -> list[LoweredBackendModule]:
    """The delegate modules of an edge program, in graph order."""
    graph_module = edge_manager.exported_program().graph_module
    return [m for m in graph_module.children() if isinstance(m, LoweredBackendModule)]


def called_delegates(edge_manager) -> list[LoweredBackendModule]:
    """The delegate modules of an edge program in the order it calls them, those of
    control-flow branches after their graph's own (the order ExecuTorch collects their
    named data in)."""

    def calls(graph_module) -> list[LoweredBackendModule]:
        found = [getattr(graph_module, node.args[0].target) for node in graph_module.graph.nodes
                 if node.target == executorch_call_delegate]
        for _, submodule, _ in get_control_flow_submodules(graph_module):
            found += calls(submodule)
        return found

    return calls(edge_manager.exported_program().graph_module)


def delegate_payloads(edge_manager) -> list[bytes]:
    return [module.processed_bytes for module in lowered_modules(edge_manager)]


def cpu_ops(edge_manager) -> list[str]:
    """Operators of an edge program that no delegate took, by target name."""
    names = [op_name(node.target) for node in edge_manager.exported_program().graph.nodes
             if node.op == "call_function" and node.target != operator.getitem]
    return [name for name in names if "executorch_call_delegate" not in name]
