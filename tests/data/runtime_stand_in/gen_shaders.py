"""C++ holding a compiled shader's size: the stand-in for ET-VK's gen_vulkan_spv.py."""

import sys
from pathlib import Path

spv, cpp = map(Path, sys.argv[1:])
cpp.write_text(f"extern const int shader_bytes = {len(spv.read_bytes())};\n")
