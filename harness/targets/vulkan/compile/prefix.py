"""ET-VK's lowering prefix (everything before the layout pass) as a cached stage of the
model pipeline: it does not depend on the strategy, so it is computed once per model and
kept on disk under :func:`prefix_key`, shared by every strategy, run, asv process and commit.
"""

import hashlib
import json
from pathlib import Path

import models
from harness.cache import DiskCache
from harness.pipeline.model import CachedStage, ModelPipeline
from harness.results.provenance import provenance
from harness.targets import edge_programs
from harness.targets.vulkan.compile import lowering as lowering_code
from harness.targets.vulkan.compile import pte, serialization
from harness.targets.vulkan.compile.lowering import VulkanLowering
from layoutkit.source_loader import files_digest

PREFIXES = DiskCache("prefixes", mapped=True)  # its tensors are made in place (serialization.py)
# The code that computes and stores a prefix. Not everything it imports: the cost model and the
# strategies act after the prefix, and an edit to them must not throw away hours of lowering.
PREFIX_CODE = (lowering_code, edge_programs, pte, serialization)


def prefix_key(name: str) -> str:
    """What a model's lowering prefix depends on: the model's name and source, torch,
    executorch and timm versions, the code that lowers (:data:`PREFIX_CODE`)."""
    facts = provenance()
    key = [name, models.source_digest(name), facts["torch_version"], facts["executorch_version"],
           facts["timm_version"], files_digest(Path(module.__file__) for module in PREFIX_CODE)]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:24]


def compile_options(name: str) -> dict:
    """ET-VK's partitioner options a model's variant asks for: half precision for ``.fp16``."""
    return {"force_fp16": True} if models.half_precision(name) else {}


LOWERING_PREFIX = CachedStage("vulkan_lowering", PREFIXES, prefix_key,
                              lambda model: VulkanLowering.from_exported(model.exported,
                                                                         compile_options=compile_options(model.name)),
                              serialization.dumps, serialization.loads, "prefix_load_seconds")


def vulkan_lowering(model: ModelPipeline) -> VulkanLowering:
    """The model's lowering prefix, from the disk cache or lowered now."""
    return model.cached(LOWERING_PREFIX)
