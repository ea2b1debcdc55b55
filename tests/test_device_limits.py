"""Device limits: a cost table states its device's largest image and storage buffer, read of
the Vulkan device as ET-VK picks it or stated by hand; a table without limits keeps its bytes."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.targets.vulkan.device import vulkan_device, vulkan_limits
from strategies.device_limits import LIMITS, DeviceLimits
from strategies.gpu_costs import CostTable, load, parse

TABLES = Path(__file__).resolve().parents[1] / "docs" / "cost-table"


def device_table(limits: dict | None) -> CostTable:
    """A table of a synthetic device that prices nothing: only its limits matter here."""
    return CostTable("synthetic device", limits=DeviceLimits.from_json(limits) if limits else None).identified()


def test_a_table_keeps_its_bytes_without_limits_and_carries_them_where_stated():
    for path in sorted(TABLES.glob("*.json")):
        body = path.read_bytes()
        assert load(path).to_bytes() == body and load(path).limits is None
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
