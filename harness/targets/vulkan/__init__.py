"""ET-VK targets: the lowering with a strategy plugged in, its metrics, validator and runners;
registered in ``targets.py``."""
