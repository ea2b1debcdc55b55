"""torch.export with a disk cache keyed by model, input shapes, versions and the digest of
the model's source (the zoo's files, a user factory's file, a saved program's bytes)."""

import hashlib
import io
import json

import torch

import models
from harness.cache import DiskCache
from harness.errors import ModelExportError, describe
from harness.results.provenance import provenance

EXPORTS = DiskCache("exports")


def cache_key(spec: models.ModelSpec) -> str:
    facts = provenance()
    key = json.dumps([spec.name, spec.input_shapes, facts["torch_version"], facts["executorch_version"],
                      facts["timm_version"], spec.source_digest])
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def _saved(exported: torch.export.ExportedProgram) -> bytes:
    buffer = io.BytesIO()
    torch.export.save(exported, buffer)
    return buffer.getvalue()


def export_model(spec: models.ModelSpec) -> torch.export.ExportedProgram:
    """The exported program for a model spec, from the cache when it is there; a saved
    program as it was saved. Always the program as loaded back: a fresh export and a
    loaded one differ in details that move ET-VK's memory planning, and results must not
    depend on whether the cache was warm."""
    if spec.exported is not None:
        return spec.exported
    exported, _ = EXPORTS.get_or_create(cache_key(spec), lambda: _export(spec), _saved,
                                        lambda body: torch.export.load(io.BytesIO(body)))
    return exported


def _export(spec: models.ModelSpec) -> torch.export.ExportedProgram:
    try:
        return torch.export.export(spec.module, spec.example_inputs)
    except Exception as error:  # torch.export raises many unrelated types
        raise ModelExportError(f"model '{spec.name}' failed to export: {describe(error)}") from error
