"""The kernel-family rule (:mod:`costmodel.kernel_families`) checked against the shaders a
device ran: each ETDump dispatch event names its ``kernel_name`` and, for an operator's
dispatch, the operator's serialized arguments (tensor sizes, storages and packed dims,
weight sizes, the other arguments' values), from which the node's signature and
representations are rebuilt without its program. A node agrees when every dispatch ET-VK
ran for it is a shader of its family.

ETDumps are read as files, from folders, or straight from the ``.tar.xz`` archives the
cost table keeps (``docs/cost-table/etdumps``), without unpacking them.
"""

import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from costmodel.kernel_families import dispatches_agree, kernel_family
from harness.errors import UsageError
from harness.targets.vulkan.local.dispatches import STAGING_KERNELS

NODE_COLUMNS = ["etdump", "operator", "family", "kernels", "input", "output", "agrees"]
_LAYOUTS = {0: "WIDTH_PACKED", 1: "HEIGHT_PACKED", 2: "CHANNELS_PACKED"}
_DTYPES = {"Float": "float32", "Half": "float16", "Int8x4": "int8", "Char": "int8", "Int": "int32"}


def _representation(argument: dict) -> str:
    return f"{argument['storage']}/{_LAYOUTS.get(argument['packed_dim'], argument['packed_dim'])}"


def _value(argument: dict):
    """One serialized argument as :func:`costmodel.signatures.signature` writes it."""
    kind = argument["type"]
    if kind == "TENSOR":
        return {"t": argument["sizes"]}
    if kind == "TENSORREF":
        return {"w": argument["sizes"]}
    if kind in ("INT", "DOUBLE", "BOOL"):
        return bool(argument["value"]) if kind == "BOOL" else argument["value"]
    return argument.get("values")  # INTLIST, or a VALUELIST's references; None for NONE


def event_node(operator: dict) -> tuple[dict, str | None, str | None]:
    """A dispatch event's operator as (signature, input representation, output
    representation). ET-VK serializes an operator's output as its last argument."""
    *args, output = operator["args"]
    tensors = [a for a in args if a["type"] == "TENSOR"]
    output_tensor = output if output["type"] == "TENSOR" else None
    signature = {"operator": operator["name"], "args": [_value(a) for a in args], "kwargs": {},
                 "outputs": [output_tensor["sizes"]] if output_tensor else [],
                 "dtype": _DTYPES.get((output_tensor or (tensors or [{}])[0]).get("dtype"))}
    return (signature, _representation(tensors[0]) if tensors else None,
            _representation(output_tensor) if output_tensor else None)


def _nodes(etdump: bytes) -> list[tuple[dict, list[str]]]:
    """Per operator node of an ETDump's first inference: its event's operator and the kernels
    dispatched for it (ET-VK's copies of inputs and outputs left out)."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    for run in deserialize_from_etdump_flatcc(etdump).run_data:
        nodes: dict = {}
        for event in run.events or []:
            name = event.profile_event and event.profile_event.delegate_debug_id_str
            dispatch = json.loads(name) if name and name.startswith("{") else {}
            if "operator" not in dispatch or dispatch["kernel_name"].startswith(STAGING_KERNELS):
                continue
            key = (event.profile_event.instruction_id, dispatch["operator"]["delegate_node_id"])
            nodes.setdefault(key, (dispatch["operator"], []))[1].append(dispatch["kernel_name"])
        if nodes:
            return list(nodes.values())
    return []


def etdumps(paths: list[Path]) -> Iterator[tuple[str, bytes]]:
    """(name, contents) of each ETDump under ``paths``: files, folders, ``.tar.xz`` archives."""
    for path in map(Path, paths):
        if path.is_dir():
            yield from etdumps(sorted(p for p in path.rglob("*") if p.suffix == ".etdump" or p.name.endswith(".tar.xz")))
        elif path.name.endswith(".tar.xz"):
            with tarfile.open(path, "r:xz") as archive:
                for member in archive:
                    if member.isfile() and member.name.endswith(".etdump"):
                        yield f"{path.name}:{member.name}", archive.extractfile(member).read()
        elif path.suffix == ".etdump":
            yield str(path), path.read_bytes()
        else:
            raise UsageError(f"{path} is no ETDump, folder or .tar.xz of ETDumps")


def node_agreement(paths: list[Path]) -> pd.DataFrame:
    """A row per operator node of every ETDump under ``paths``: its family by the rule, the
    kernels the device dispatched for it and whether they are its family's."""
    rows = []
    for name, contents in etdumps(paths):
        for operator, kernels in _nodes(contents):
            signature, input_repr, output_repr = event_node(operator)
            family = kernel_family(signature, input_repr, output_repr)
            rows.append([name, operator["name"], family, " + ".join(kernels), input_repr, output_repr,
                         dispatches_agree(family, kernels)])
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


def agreement_by_family(nodes: pd.DataFrame) -> pd.DataFrame:
    """Per family: nodes, nodes that agree, and the kernels of those that do not."""
    grouped = nodes.groupby("family")
    return pd.DataFrame({
        "nodes": grouped.size(), "agree": grouped["agrees"].sum(),
        "disagreeing kernels": grouped.apply(lambda part: ", ".join(sorted(set(part.loc[~part["agrees"], "kernels"]))),
                                             include_groups=False),
    }).sort_values("nodes", ascending=False)
