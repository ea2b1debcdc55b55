"""Programs sent to another machine without their weights, and given weights again there.

A .pte carries its weights: a ViT-S's program is 88 MB, and a calibration corpus hundreds of
programs. How long an ET-VK program's dispatches take does not depend on the values of its
weights, only on their shapes, types and representations, so a program can travel with its
float and int8 weights zeroed (it compresses to almost nothing) and have them filled again
where it runs, with pseudo-random values of the same type (:func:`refill`), before the
runtime loads it. Zeros are not run as they are: a GPU may compress memory that holds them
and read it faster. Other constants (int32 and int64 tensors: indices, shapes) travel as
they are.

``layoutbench pack`` (:mod:`harness.targets.vulkan.remote.packing`) strips them; ``remote_runner.py``
refills a program that has a ``.weights.json`` beside it (:func:`refill`: standard library only),
``remote_runner.sh`` splices the same blocks (:func:`random_blocks`) in, byte for byte the same.
"""

import json
import random
import struct

MANIFEST_SUFFIX = ".weights.json"
# Weight types filled with random values: element format for struct (None: random bytes).
REFILLED_TYPES = {"FLOAT32": "f", "FLOAT16": "e", "INT8": None, "UINT8": None}
BLOCK_BYTES = 1 << 16  # a random block, repeated through each region
WEIGHT_SCALE = 0.05  # |values| below this: no overflow or denormal in any operator


def _random_block(dtype: str, seed: int) -> bytes:
    rng = random.Random(seed)
    element_format = REFILLED_TYPES[dtype]
    if element_format is None:
        return rng.randbytes(BLOCK_BYTES)
    count = BLOCK_BYTES // struct.calcsize(element_format)
    return struct.pack(f"<{count}{element_format}", *(rng.uniform(-WEIGHT_SCALE, WEIGHT_SCALE) for _ in range(count)))


def random_blocks() -> dict[str, bytes]:
    """The block of pseudo-random values of each type that :func:`refill` repeats through a region
    (seeded by the type's place in a sorted list: the same on every machine and Python)."""
    return {dtype: _random_block(dtype, seed) for seed, dtype in enumerate(sorted(REFILLED_TYPES))}


def refill(program: bytearray, manifest: list[dict]) -> None:
    """Fill each stripped region of ``program`` (in place) with pseudo-random values of its type."""
    blocks = random_blocks()
    for region in manifest:
        start, size = region["offset"], region["size"]
        program[start:start + size] = (blocks[region["dtype"]] * (size // BLOCK_BYTES + 1))[:size]


def _constant_types(program: bytes, plan: dict, segment_base: int) -> dict:
    """The type of each named weight the program's Vulkan delegates read, by its key."""
    from executorch.backends.vulkan.serialization.vulkan_graph_serialize import (
        extract_vk_flatbuffer,
        flatbuffer_to_vk_graph,
    )

    types = {}
    for execution_plan in plan["execution_plan"]:
        for delegate in execution_plan["delegates"]:
            if delegate["id"] != "VulkanBackend":
                continue
            processed = delegate["processed"]
            if processed["location"] == "SEGMENT":
                segment = plan["segments"][processed["index"]]
                blob = program[segment_base + segment["offset"]:][:segment["size"]]
            else:
                blob = bytes(plan["backend_delegate_data"][processed["index"]]["data"])
            graph = flatbuffer_to_vk_graph(extract_vk_flatbuffer(blob))
            for value in graph.values:
                tensor = value.value
                if type(tensor).__name__ == "VkTensor" and tensor.constant_id >= 0:
                    key = graph.constants[tensor.constant_id].named_key
                    if key:
                        types[key] = tensor.datatype.name
    return types


def strip(program: bytes) -> tuple[bytes, list[dict]]:
    """``program`` with its float and int8 weights zeroed, and the manifest :func:`refill` reads:
    each zeroed region's offset, size and type."""
    from executorch.exir._serialize._flatbuffer import _program_flatbuffer_to_json
    from executorch.exir._serialize._program import _get_extended_header

    header = _get_extended_header(program)
    if header is None:
        raise ValueError("not a .pte with segments (no extended header)")
    plan = json.loads(_program_flatbuffer_to_json(program[:header.program_size]))
    types = _constant_types(program, plan, header.segment_base_offset)
    stripped, manifest = bytearray(program), []
    for named in plan.get("named_data") or []:
        dtype = types.get(named["key"])
        if dtype not in REFILLED_TYPES:
            continue
        segment = plan["segments"][named["segment_index"]]
        start = header.segment_base_offset + segment["offset"]
        stripped[start:start + segment["size"]] = bytes(segment["size"])
        manifest.append({"offset": start, "size": segment["size"], "dtype": dtype})
    return bytes(stripped), manifest
