"""Peak memory of lowering a model for ET-VK with the pinned layout pass: the largest resident
set of a new process that loads the model's export and lowers it (to_edge, partitioning,
preprocess), what asv's ``peakmem`` of a lowering benchmark measured. It depends on exactly
what the model's lowering prefix depends on, so it is kept on disk under the prefix's key: a
commit that changes a strategy, or none of those, reads it instead of lowering every model again.

    python -m harness.targets.vulkan.compile.lowering_memory MODEL    # the measured process itself
"""

import json
import os
import subprocess
import sys
import tempfile

from harness.cache import DiskCache
from harness.errors import LoweringError
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile.lowering import VulkanLowering
from harness.targets.vulkan.compile.prefix import prefix_key

PEAKS = DiskCache("lowering-memory")


def lowering_peak_bytes(name: str) -> int:
    """The peak resident bytes of lowering ``name`` (measured now if no entry holds it)."""
    peak, _ = PEAKS.get_or_create(prefix_key(name), lambda: _lower_in_new_process(name),
                                  lambda value: json.dumps(value).encode(), json.loads)
    return peak


def _lower_in_new_process(name: str) -> int:
    pipeline(name).exported  # exported into the cache first: the measured process only loads it
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen([sys.executable, "-m", __name__, name], stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            lines = [line for line in errors.read().decode(errors="replace").splitlines() if line.strip()]
            raise LoweringError(f"lowering {name} to measure its memory failed (exit status {process.returncode}): "
                                f"{lines[-1] if lines else 'no message'}")
    return usage.ru_maxrss * 1024  # Linux reports KiB


if __name__ == "__main__":  # the measured process, in the cache its environment (its parent's) names
    from harness import quiet
    from layoutkit.files import CacheSettings, install

    quiet.apply(verbose=False)
    install(CacheSettings.from_environment(os.environ))
    VulkanLowering.from_exported(pipeline(sys.argv[1]).exported)
