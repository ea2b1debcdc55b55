"""ET-VK targets by stage: ``compile``, ``local`` (runs here), ``remote`` (runs elsewhere), joined in ``targets.py``."""
