"""Device limits: the Vulkan device's largest image and storage buffer, read as ET-VK picks
the device."""

import shutil
import subprocess

import pytest

from harness.targets.vulkan.device import vulkan_device, vulkan_limits

LIMITS = ("maxImageDimension2D", "maxImageDimension3D", "maxStorageBufferRange")


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
