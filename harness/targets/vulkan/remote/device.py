"""The Vulkan device an ET-VK runtime on this machine runs on, by name (e.g. "llvmpipe
(LLVM 15.0.6, 256 bits)" for Mesa's lavapipe, "NVIDIA H100 80GB HBM3"), and its limits that
make a layout illegal there (:mod:`costmodel.device_limits`), as ``vulkaninfo`` prints them.

Asked of the Vulkan loader directly (ctypes), and chosen as ET-VK chooses
(``backends/vulkan/runtime/vk_api/Runtime.cpp``): ``$ETVK_DEVICE_INDEX`` if set (its value
handed in by the caller), else the first device of the highest kind, discrete GPU over
integrated, virtual, other, CPU. GPU times mean nothing without the device they came from:
records and cost tables carry it.
Standard library only: ``remote_runner.py`` asks the same of a machine without ExecuTorch,
where ``vulkaninfo`` may not be installed and would not say which device ET-VK picks.
"""

import ctypes
import ctypes.util
import functools

_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
_PRIORITY = {2: 5, 1: 4, 3: 3, 4: 1}  # VkPhysicalDeviceType -> ET-VK's preference; others 2
_NAME_OFFSET = 20  # apiVersion, driverVersion, vendorID, deviceID, deviceType: five uint32
_NAME_SIZE = 256
_PROPERTIES_SIZE = 4096  # VkPhysicalDeviceProperties is under 1 KiB; room to spare
# VkPhysicalDeviceLimits follows the name and the 16-byte pipelineCacheUUID (offset 292),
# aligned to 8 (it holds VkDeviceSize fields); the limits read, each a uint32, by offset in it.
_LIMITS_OFFSET = 296
_LIMITS = {"maxImageDimension2D": 4, "maxImageDimension3D": 8, "maxStorageBufferRange": 28}


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [("sType", ctypes.c_uint32), ("pNext", ctypes.c_void_p), ("flags", ctypes.c_uint32),
                ("pApplicationInfo", ctypes.c_void_p), ("enabledLayerCount", ctypes.c_uint32),
                ("ppEnabledLayerNames", ctypes.c_void_p), ("enabledExtensionCount", ctypes.c_uint32),
                ("ppEnabledExtensionNames", ctypes.c_void_p)]


def _devices(vulkan) -> list[tuple[str, int, dict]]:
    instance = ctypes.c_void_p()
    info = _InstanceCreateInfo(sType=_STRUCTURE_TYPE_INSTANCE_CREATE_INFO)
    if vulkan.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance)) != 0:
        return []
    try:
        count = ctypes.c_uint32()
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        handles = (ctypes.c_void_p * count.value)()
        vulkan.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        found = []
        for handle in handles[:count.value]:
            properties = ctypes.create_string_buffer(_PROPERTIES_SIZE)
            vulkan.vkGetPhysicalDeviceProperties(ctypes.c_void_p(handle), properties)
            kind = int.from_bytes(properties.raw[16:20], "little")
            name = properties.raw[_NAME_OFFSET:_NAME_OFFSET + _NAME_SIZE].split(b"\0", 1)[0].decode(errors="replace")
            limits = {limit: int.from_bytes(properties.raw[_LIMITS_OFFSET + at:_LIMITS_OFFSET + at + 4], "little")
                      for limit, at in _LIMITS.items()}
            found.append((name, kind, limits))
        return found
    finally:
        vulkan.vkDestroyInstance(instance, None)


@functools.cache
def _chosen(index: str | None) -> tuple[str, int, dict] | None:
    library = ctypes.util.find_library("vulkan") or "libvulkan.so.1"
    try:
        vulkan = ctypes.CDLL(library)
    except OSError:
        return None
    devices = _devices(vulkan)
    if not devices:
        return None
    if index and index.isdigit() and int(index) < len(devices):
        return devices[int(index)]
    return max(devices, key=lambda device: _PRIORITY.get(device[1], 2))


def vulkan_device(index: str | None = None) -> str | None:
    """The name of the device ET-VK would pick here, ``index`` its ``$ETVK_DEVICE_INDEX``, or
    None without a Vulkan driver."""
    chosen = _chosen(index)
    return chosen[0] if chosen else None


def vulkan_limits(index: str | None = None) -> dict | None:
    """That device's image and storage buffer limits (``{"maxImageDimension3D": 4096, ...}``),
    or None without a Vulkan driver."""
    chosen = _chosen(index)
    return dict(chosen[2]) if chosen else None
