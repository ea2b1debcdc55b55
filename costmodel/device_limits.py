"""What makes a layout illegal on one Vulkan device: the largest image and storage buffer it binds.

ET-VK keeps a tensor in a 3-D image (``TEXTURE_3D``; ``TEXTURE_2D`` exists too) or a storage
buffer. An image whose extents exceed the device's ``maxImageDimension3D`` (``2D``), or a buffer
of more bytes than its ``maxStorageBufferRange``, is outside what the device promises, and
nothing on the way stops one: ExecuTorch's layout pass keeps textures within its own
``texture_limits`` (16,384 x 16,384 x 2,048 by default), not the device's; its runtime checks
image extents only in a debug build, and a buffer's element count, not its bytes. Past the
limit some drivers compute wrong values without an error (an embedding over 16,384 rows on a
texture, on an Adreno whose image limit is 16,384).

A cost table (:class:`costmodel.table.CostTable`) carries its device's limits, named as
``VkPhysicalDeviceLimits`` names them, so that a device's own are copied from ``vulkaninfo``; a
limit not stated is not checked. Pure Python: the command line reads a table without torch.
"""

from dataclasses import dataclass

# Vulkan's name of each limit -> the storage it bounds, and what of a tensor it bounds there.
LIMITS = {
    "maxImageDimension2D": "TEXTURE_2D",
    "maxImageDimension3D": "TEXTURE_3D",
    "maxStorageBufferRange": "BUFFER",
}


@dataclass(frozen=True)
class DeviceLimits:
    """The limits a device states (Vulkan's name -> value); :data:`LIMITS` says which."""

    values: tuple  # ((name, value), ...) in LIMITS' order: frozen, so a table can be hashed and compared

    @classmethod
    def from_json(cls, data: dict) -> "DeviceLimits":
        """From ``{"maxImageDimension3D": 16384, ...}``: each a known name and a whole number > 0."""
        if not isinstance(data, dict) or not data:
            raise ValueError(f"limits are an object of one or more of {', '.join(LIMITS)}, not {data!r}")
        unknown = sorted(set(data) - set(LIMITS))
        if unknown:
            raise ValueError(f"unknown device limit {unknown[0]!r}; known: {', '.join(LIMITS)}")
        for name, value in data.items():
            if type(value) is not int or value < 1:
                raise ValueError(f"device limit {name} is {value!r}, not a whole number > 0")
        return cls(tuple((name, data[name]) for name in LIMITS if name in data))

    @classmethod
    def parse(cls, text: str) -> "DeviceLimits":
        """From ``maxImageDimension3D=16384,maxStorageBufferRange=1073741824`` (``calibrate --limits``)."""
        data = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, value = item.partition("=")
            if not value.strip().isdigit():
                raise ValueError(f"expected NAME=NUMBER (e.g. maxImageDimension3D=16384), not {item!r}")
            data[name.strip()] = int(value)
        return cls.from_json(data)

    def to_json(self) -> dict:
        return dict(self.values)

    def exceeded(self, storage: str, extents: tuple, nbytes: int) -> tuple[str, int, float] | None:
        """The limit a tensor breaks, stored in ``storage`` (``TEXTURE_3D``, ``TEXTURE_2D``,
        ``BUFFER``) as an image of ``extents`` or a buffer of ``nbytes``: (its name, its value,
        how many times over it the tensor is), or None within every stated limit."""
        for name, value in self.values:
            if LIMITS[name] != storage:
                continue
            size = nbytes if storage == "BUFFER" else max(extents)
            if size > value:
                return name, value, size / value
        return None

    @staticmethod
    def common(stated: list) -> "DeviceLimits | None":
        """The limits every one of ``stated`` (DeviceLimits, dicts as :meth:`from_json` reads, or
        None where unknown) allows: the smallest of each, so that runs of one device on two
        drivers give a table that holds on both; None where none states any."""
        smallest: dict = {}
        for limits in filter(None, stated):
            values = limits.values if isinstance(limits, DeviceLimits) else DeviceLimits.from_json(limits).values
            for name, value in values:
                smallest[name] = min(value, smallest.get(name, value))
        return DeviceLimits.from_json(smallest) if smallest else None
