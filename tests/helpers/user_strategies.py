"""Strategies a user might write outside the package, used to test the plug-in paths."""

import os
import time
from pathlib import Path

import executorch.backends.vulkan.utils as vk_utils
import torch
from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass
from executorch.backends.vulkan.serialization.vulkan_graph_schema import (
    VkMemoryLayout,
    VkStorageType,
)

from layoutkit.errors import UnavailableError
from strategies.all_width_packed import AllWidthPacked


class PreferChannelsPacked(AllWidthPacked):
    """Channels-packed wherever the operator allows it; a valid user strategy."""

    preferred = vk_utils.TensorRepSet(
        {VkMemoryLayout.TENSOR_CHANNELS_PACKED}, {VkMemoryLayout.TENSOR_CHANNELS_PACKED}
    )


class IgnoresOperatorRules(TagMemoryMetaPass):
    """Deliberately invalid: tags every op output as a height-packed buffer, whatever the
    operator accepts."""

    def set_op_node_tensor_reprs(self, graph_module, op_node, transition_cache=None):
        super().set_op_node_tensor_reprs(graph_module, op_node, transition_cache)
        if self.is_valid_op_node(op_node) and vk_utils.is_single_tensor_node(op_node):
            vk_utils.set_node_repr(
                op_node,
                vk_utils.TensorRepr(VkStorageType.BUFFER, VkMemoryLayout.TENSOR_HEIGHT_PACKED),
            )


class Int8AsWidthPacked(TagMemoryMetaPass):
    """Deliberately invalid: tags every int8 op output as a width-packed buffer, a layout the
    dtype allows but the int8 operators (q8ta_*) do not."""

    def set_op_node_tensor_reprs(self, graph_module, op_node, transition_cache=None):
        super().set_op_node_tensor_reprs(graph_module, op_node, transition_cache)
        if (self.is_valid_op_node(op_node) and vk_utils.is_single_tensor_node(op_node)
                and op_node.meta["val"].dtype == torch.int8):
            vk_utils.set_node_repr(
                op_node,
                vk_utils.TensorRepr(VkStorageType.BUFFER, VkMemoryLayout.TENSOR_WIDTH_PACKED),
            )


class NotAPass:
    """Not a TagMemoryMetaPass: naming it must fail clearly."""


class FloatAsPackedInt8(AllWidthPacked):
    """Deliberately invalid: prefers a PACKED_INT8 buffer layout, which layout-agnostic ops'
    OpRepSets offer to float tensors too, although a float tensor cannot be stored so."""

    preferred = vk_utils.TensorRepSet({VkMemoryLayout.PACKED_INT8_4W}, set())


class ShallowSearch(TagMemoryMetaPass):
    """The pinned pass with a 4-node downstream search budget instead of 64: a plausible
    speed-up that costs synthetic_small one transition (9 -> 10), used to plant a regression."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_trace_search_depth = 4


class NeedsAMissingTool(TagMemoryMetaPass):
    """Runs only where a tool no host has is installed: its records and benchmarks are skipped."""

    @staticmethod
    def check_available() -> None:
        raise UnavailableError("needs the frobnicator, which is not installed")


class Crashes(TagMemoryMetaPass):
    """Deliberately broken: fails with an unexpected error inside the pass."""

    def call(self, graph_module):
        raise RuntimeError("a bug in the user's pass")


class FindsTheDiskFull(TagMemoryMetaPass):
    """Fails as a full disk fails a pass that writes: ``ENOSPC``, the host's doing, not the pass's."""

    def call(self, graph_module):
        import errno

        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class Aborts(TagMemoryMetaPass):
    """Deliberately fatal: aborts the whole process inside the pass, as a native crash would."""

    def call(self, graph_module):
        import os

        os.abort()


class Hangs(TagMemoryMetaPass):
    """Deliberately stuck: never returns from the pass."""

    def call(self, graph_module):
        import time

        while True:
            time.sleep(1)


class HoldsMemory(TagMemoryMetaPass):
    """Deliberately greedy: fills 4 GiB and holds it."""

    def call(self, graph_module):
        import time

        held = b"x" * (4 << 30)
        while held:
            time.sleep(1)


class WaitsForACacheRead(TagMemoryMetaPass):
    """The pinned pass, the first time it runs in a sweep waiting until the cache entry
    $USER_STRATEGY_ENTRY has been read (the cache marks a read entry used by setting its
    modification time, which the test set to $USER_STRATEGY_ENTRY_MTIME) or
    $USER_STRATEGY_WAIT_SECONDS have passed; it appends ``read`` or ``unread`` to
    $USER_STRATEGY_LOG. So a test learns whether another worker read its model's entry while
    this measurement was under way, however slowly either process runs."""

    def call(self, graph_module):
        import os
        import time

        log, entry = os.environ["USER_STRATEGY_LOG"], os.environ["USER_STRATEGY_ENTRY"]
        if not os.path.exists(log):  # the sweep's first pass
            unread = float(os.environ["USER_STRATEGY_ENTRY_MTIME"])
            deadline = time.monotonic() + float(os.environ["USER_STRATEGY_WAIT_SECONDS"])
            while os.stat(entry).st_mtime == unread and time.monotonic() < deadline:
                time.sleep(0.05)
            with open(log, "a") as out:
                out.write("unread\n" if os.stat(entry).st_mtime == unread else "read\n")
        return super().call(graph_module)


def waiting_for_a_cache_read(monkeypatch, tmp_path, entry, wait_seconds: float) -> Path:
    """Set up :class:`WaitsForACacheRead` to wait for ``entry`` (whose
    modification time is set a day back, so a read shows); returns its log. Its settings are
    in the environment, which a worker has from the fork server it forks from: the one an
    earlier test started is stopped, so the sweep starts one with them, as a command does."""
    import multiprocessing.forkserver

    unread = int(time.time()) - 86400
    os.utime(entry, (unread, unread))
    log = tmp_path / "reads.log"
    for name, value in [("LOG", log), ("ENTRY", entry), ("ENTRY_MTIME", unread), ("WAIT_SECONDS", wait_seconds)]:
        monkeypatch.setenv(f"USER_STRATEGY_{name}", str(value))
    multiprocessing.forkserver._forkserver._stop()  # CPython's own tests stop it so
    return log
