"""The strategy registry and its plug-in paths, and the validator's verdicts."""

import pytest

from harness.errors import InvalidAssignmentError, UnknownNameError
from harness.pipeline.model import pipeline
from harness.targets.vulkan.compile import validator
from harness.targets.vulkan.compile.prefix import vulkan_lowering
import strategies

BUILT_INS = {"bfs-downstream", "bfs-refined", "dfs-upstream", "all-width-packed"}


def test_built_ins_are_registered_pass_subclasses():
    from executorch.backends.vulkan._passes.tag_memory_meta_pass import TagMemoryMetaPass

    assert BUILT_INS <= set(strategies.list_strategies())
    for name in BUILT_INS:
        cls = strategies.get_strategy(name)
        assert issubclass(cls, TagMemoryMetaPass)
        assert cls.strategy_name == name
        assert cls.__doc__


def test_unknown_strategy_names_the_known_ones():
    with pytest.raises(UnknownNameError) as raised:
        strategies.get_strategy("greedy-magic")
    message = str(raised.value)
    assert "greedy-magic" in message and "bfs-downstream" in message and "\n" not in message


@pytest.mark.parametrize(
    "path, reason",
    [
        ("tests.helpers.user_strategies:NotAPass", "not a TagMemoryMetaPass"),
        ("tests.helpers.user_strategies:Missing", "has no 'Missing'"),
        ("no_such_package.mod:Class", "cannot import"),
    ],
)
def test_bad_user_strategy_paths_fail_clearly(path, reason):
    with pytest.raises(UnknownNameError, match=reason):
        strategies.get_strategy(path)


def test_user_strategy_by_module_path():
    from tests.helpers.user_strategies import PreferChannelsPacked

    assert strategies.get_strategy("tests.helpers.user_strategies:PreferChannelsPacked") is PreferChannelsPacked
    assert strategies.resolve_strategies("bfs-downstream, tests.helpers.user_strategies:PreferChannelsPacked") == [
        "bfs-downstream",
        "tests.helpers.user_strategies:PreferChannelsPacked",
    ]


def test_user_strategy_by_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "user_layouts-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-layouts\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{strategies.ENTRY_POINT_GROUP}]\nprefer-channels = tests.helpers.user_strategies:PreferChannelsPacked\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "prefer-channels" in strategies.list_strategies()
    assert "prefer-channels" in strategies.resolve_strategies("all")
    from tests.helpers.user_strategies import PreferChannelsPacked

    assert strategies.get_strategy("prefer-channels") is PreferChannelsPacked


def test_user_strategy_is_lowered_and_validated():
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(
        strategies.get_strategy("tests.helpers.user_strategies:PreferChannelsPacked")
    )
    assert validator.validate(lowered) > 0


def test_validator_names_node_representation_and_accepted_set():
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(
        strategies.get_strategy("tests.helpers.user_strategies:IgnoresOperatorRules")
    )
    with pytest.raises(InvalidAssignmentError) as raised:
        validator.validate(lowered)
    message = str(raised.value)
    assert "BUFFER/HEIGHT_PACKED" in message
    assert "accepts TensorRepSet(" in message
    assert message.split(" ")[0] in {n.name for p in lowered.partitions for n in p.program.graph.nodes}


def test_validator_rejects_a_float_tensor_in_a_packed_int8_layout():
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(
        strategies.get_strategy("tests.helpers.user_strategies:FloatAsPackedInt8")
    )
    with pytest.raises(InvalidAssignmentError, match="torch.float32 tensor got BUFFER/PACKED_INT8_4W"):
        validator.validate(lowered)


@pytest.mark.parametrize("name", ["ilp-time", "bfs-time"])
def test_a_priced_strategy_reads_its_table_from_its_constructor_and_nowhere_else(name):
    """The command line's default table is in the environment (conftest) and another pass was
    just constructed with one, yet a pass constructed without a table has none, as in
    ExecuTorch's own pipeline: it fails saying how to get one."""
    import os

    from layoutkit.errors import UnavailableError
    from costmodel.table import COSTS_ENV

    from .helpers.tables import TRANSITIONS_ONLY

    assert os.environ[COSTS_ENV]
    lowering = vulkan_lowering(pipeline("synthetic_small"))
    priced = lowering.lower(strategies.get_strategy(name), TRANSITIONS_ONLY)
    assert all(p.layout_pass.costs is TRANSITIONS_ONLY for p in priced.partitions)
    with pytest.raises(Exception) as raised:  # ExecuTorch's pass manager wraps what a pass raises
        lowering.lower(strategies.get_strategy(name))
    causes = [raised.value]
    while causes[-1].__cause__ or causes[-1].__context__:
        causes.append(causes[-1].__cause__ or causes[-1].__context__)
    assert any(isinstance(c, UnavailableError) and "no GPU cost table: pass --costs FILE" in str(c) for c in causes)


def test_no_strategy_module_keeps_a_table_of_its_own():
    """A table reaches a strategy through its constructor only: no module of the package
    rebinds a module-level name at run time (``global``), where a table in force would live."""
    import ast
    from pathlib import Path

    package = Path(strategies.__file__).parent
    rebinding = [f"{path.name}:{node.lineno}" for path in sorted(package.glob("*.py"))
                 for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Global)]
    assert rebinding == []
