"""Device limits: a cost table states its device's largest image and storage buffer; a record
under it counts the tensors of its program beyond them (each texture's image extents as ET-VK
sizes them for its packed dim, each buffer's bytes) and names the worst, and vulkan-run does
not run such a program. A table without limits flags nothing and keeps its bytes."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from executorch.backends.vulkan.serialization.vulkan_graph_schema import VkMemoryLayout

from costmodel.device_limits import LIMITS, DeviceLimits
from costmodel.table import CostTable, load, parse
from harness.errors import UsageError
from harness.pipeline.model import pipeline
from harness.results.results_dir import ResultsDir
from harness.results.store import RecordStore
from harness.sweep.execution import Execution
from harness.sweep.planning import run_sweep
from harness.targets import MeasureContext
from harness.targets.vulkan.compile import metrics
from harness.targets.vulkan.compile.prefix import vulkan_lowering
from harness.targets.vulkan.remote.device import vulkan_device, vulkan_limits
import strategies
from strategies.calibration import round_name
from strategies.representations import image_extents

MODEL = "synthetic_small"
# ExecuTorch's own choices keep synthetic_small's (64, 8) views in textures of 64 texels a side;
# the second calibration round puts them in buffers (2,048 bytes, as every tensor of the model).
TEXTURES, BUFFERS = "bfs-downstream", round_name(2)
SMALL_IMAGES = {"maxImageDimension3D": 32, "maxStorageBufferRange": 1 << 30}
SMALL_BUFFERS = {"maxImageDimension3D": 16384, "maxStorageBufferRange": 1024}
TABLES = Path(__file__).resolve().parents[1] / "docs" / "cost-table"


def device_table(limits: dict | None) -> CostTable:
    """A table of a synthetic device that prices nothing: only its limits matter here."""
    return CostTable("synthetic device", limits=DeviceLimits.from_json(limits) if limits else None).identified()


@pytest.fixture(scope="module")
def lowered() -> dict:
    lowering = vulkan_lowering(pipeline(MODEL))
    return {strategy: lowering.lower(strategies.get_strategy(strategy)) for strategy in (TEXTURES, BUFFERS)}


def violations(lowered, limits: dict) -> dict:
    return metrics.limit_violations(lowered, DeviceLimits.from_json(limits))


def test_a_device_s_limits_flag_the_assignment_beyond_them_and_not_the_one_within(lowered):
    small_images = {strategy: violations(program, SMALL_IMAGES) for strategy, program in lowered.items()}
    assert small_images[TEXTURES]["limit_violations"] > 0
    assert re.search(r"TEXTURE_3D/\w+ \[64, 8\]: image \d+x64x1 > maxImageDimension3D 32$",
                     small_images[TEXTURES]["worst_limit_violation"])
    assert small_images[BUFFERS] == {"limit_violations": 0, "worst_limit_violation": None}

    small_buffers = {strategy: violations(program, SMALL_BUFFERS) for strategy, program in lowered.items()}
    assert small_buffers[TEXTURES] == {"limit_violations": 0, "worst_limit_violation": None}
    assert small_buffers[BUFFERS]["limit_violations"] > 0
    assert small_buffers[BUFFERS]["worst_limit_violation"].endswith(": 2048 bytes > maxStorageBufferRange 1024")
    # A limit is the largest extent allowed: ExecuTorch's (64, 8) width-packed image is 2 x 64 x 1.
    assert violations(lowered[TEXTURES], {"maxImageDimension3D": 64})["limit_violations"] == 0


def test_a_texture_s_extents_are_its_packed_dim_s():
    """A (1, 4, 4, 256) tensor width-packed is an image of 64 texels along x; channels-packed, 256."""
    sizes = (1, 4, 4, 256)
    width, channels = (image_extents(sizes, layout) for layout in (VkMemoryLayout.TENSOR_WIDTH_PACKED,
                                                                    VkMemoryLayout.TENSOR_CHANNELS_PACKED))
    assert (width, channels) == ((64, 4, 4), (256, 4, 1))
    limits = DeviceLimits.from_json({"maxImageDimension3D": 64})
    assert limits.exceeded("TEXTURE_3D", width, 0) is None
    assert limits.exceeded("TEXTURE_3D", channels, 0) == ("maxImageDimension3D", 64, 4.0)
    assert image_extents(sizes, VkMemoryLayout.PACKED_INT8_4W) == (16, 4, 4)  # 16 int8 values a texel


def test_a_record_under_a_table_carries_its_violations_and_a_table_without_limits_flags_nothing(tmp_path):
    def records(table) -> dict:
        sweep = run_sweep([MODEL], [TEXTURES, BUFFERS], "vulkan", RecordStore(tmp_path / table.digest), fresh=True,
                          context=MeasureContext(tmp_path, costs=table), execution=Execution(workers=0))
        return {record["strategy"]: record for record in sweep.records}

    flagged = records(device_table(SMALL_IMAGES))
    assert flagged[TEXTURES]["status"] == "ok" and flagged[TEXTURES]["limit_violations"] > 0
    assert "maxImageDimension3D 32" in flagged[TEXTURES]["worst_limit_violation"]
    assert flagged[BUFFERS]["limit_violations"] == 0 and flagged[BUFFERS]["worst_limit_violation"] is None
    for record in records(device_table(None)).values():
        assert record["status"] == "ok" and record["predicted_gpu_ms"] is not None
        assert record["limit_violations"] is None and record.get("worst_limit_violation") is None


def test_vulkan_run_does_not_run_a_program_beyond_its_table_s_limits(tmp_path):
    """Refused before the runner starts (it would fail the record otherwise), and an earlier
    program of that name goes, so remote_runner.py does not run it either."""
    never_run = tmp_path / "executor_runner"
    never_run.write_text("#!/bin/sh\necho started >&2\nexit 3\n")
    never_run.chmod(0o755)
    stale = ResultsDir(tmp_path).program(MODEL, TEXTURES)
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier program")
    table = device_table(SMALL_IMAGES)
    sweep = run_sweep([MODEL], [TEXTURES], "vulkan-run", RecordStore(tmp_path), fresh=True,
                      context=MeasureContext(tmp_path, et_runner=str(never_run), costs=table),
                      execution=Execution(workers=0))
    (record,) = sweep.records
    assert record["status"] == "failed" and record["limit_violations"] > 0
    assert record["reason"] == (f"not run: {record['limit_violations']} tensors break the limits of synthetic device "
                                f"(the cost table's device), the worst {record['worst_limit_violation']}")
    assert record["latency_ms_median"] is None and not stale.exists()
    assert record["transitions"] is not None  # what the lowering counted is kept


def test_a_table_keeps_its_bytes_without_limits_and_carries_them_where_stated():
    for path in sorted(TABLES.glob("*.json")):  # every committed table reads back to its own bytes
        body = path.read_bytes()
        assert load(path).to_bytes() == body
    for name in ("h100.json", "lavapipe.json"):  # the limits their runs read
        assert load(TABLES / name).limits.to_json()["maxImageDimension3D"] in (16384, 4096)
    without = device_table(None)
    stated = device_table({"maxStorageBufferRange": 1 << 30, "maxImageDimension3D": 16384})
    assert "limits" not in json.loads(without.to_bytes())
    data = json.loads(stated.to_bytes())
    assert list(data)[:3] == ["format", "device", "limits"]
    assert data["limits"] == {"maxImageDimension3D": 16384, "maxStorageBufferRange": 1 << 30}  # Vulkan's order
    assert parse(stated.to_bytes()).limits == stated.limits and stated.digest != without.digest
    damaged = stated.to_bytes().replace(b'"maxImageDimension3D"', b'"maxImageDimension4D"')
    with pytest.raises(UsageError, match="^the table is not a cost table written by `layoutbench calibrate` "
                                         r"\(unknown device limit 'maxImageDimension4D'; known: maxImage"):
        parse(damaged)


@pytest.mark.parametrize("text, message", [
    ("maxImageDimension3D=0", "device limit maxImageDimension3D is 0, not a whole number > 0"),
    ("maxImageDimension3D", "expected NAME=NUMBER (e.g. maxImageDimension3D=16384), not 'maxImageDimension3D'"),
    ("", "limits are an object of one or more of"),
])
def test_limits_stated_by_hand_are_checked(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        DeviceLimits.parse(text)
    assert DeviceLimits.parse("maxImageDimension3D=16384, maxStorageBufferRange=65536").to_json() == {
        "maxImageDimension3D": 16384, "maxStorageBufferRange": 65536}


def test_the_device_s_limits_are_those_vulkaninfo_prints():
    """Read of the Vulkan loader for the device ET-VK picks (no vulkaninfo needed), they are
    the ones vulkaninfo prints for that device."""
    if vulkan_device() is None:
        pytest.skip("no Vulkan driver on this host")
    if shutil.which("vulkaninfo") is None:
        pytest.skip("vulkaninfo is not installed (Debian: vulkan-tools)")
    printed, device = {}, None
    for line in subprocess.run(["vulkaninfo"], capture_output=True, text=True, timeout=120).stdout.splitlines():
        name, _, value = (part.strip() for part in line.partition("="))
        if name == "deviceName":
            device = value
        elif device == vulkan_device() and name in LIMITS:
            printed.setdefault(name, int(value))
    assert vulkan_limits() == printed and set(printed) == set(LIMITS)
