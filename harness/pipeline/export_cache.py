"""torch.export with a disk cache keyed by model, input shapes, versions and the digest of
the model's source (the zoo's files, a user factory's file, a saved program's bytes)."""

import hashlib
import json
from pathlib import Path

import torch

import models
from harness.cache import cache_root
from harness.errors import ModelExportError
from harness.results.provenance import provenance


def cache_dir() -> Path:
    return cache_root() / "exports"


def cache_key(spec: models.ModelSpec) -> str:
    facts = provenance()
    key = json.dumps(
        [spec.name, spec.input_shapes, facts["torch_version"], facts["executorch_version"],
         facts["timm_version"], spec.source_digest]
    )
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def _describe_failure(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def export_model(spec: models.ModelSpec) -> torch.export.ExportedProgram:
    """The exported program for a model spec, from the cache when it is there; a saved
    program as it was saved."""
    if spec.exported is not None:
        return spec.exported
    path = cache_dir() / f"{cache_key(spec)}.pt2"
    if not path.exists():
        _export_to(spec, path)
    # Always the program as loaded back: a fresh export and a loaded one differ in
    # details that move ET-VK's memory planning, and results must not depend on
    # whether the cache was warm.
    return torch.export.load(path)


def _export_to(spec: models.ModelSpec, path: Path) -> None:
    try:
        exported = torch.export.export(spec.module, spec.example_inputs)
    except Exception as error:  # torch.export raises many unrelated types
        raise ModelExportError(
            f"model '{spec.name}' failed to export: {_describe_failure(error)}"
        ) from error
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    torch.export.save(exported, partial)
    partial.replace(path)
