"""Running here: the ET-VK runtime and its runs, what their ETDumps say, and records of runs."""
