"""The summary of a sweep over many models, and a report that stays readable at that size."""

from harness.results import relative, report, summary
from harness.results.frames import load
from harness.results.store import RecordStore, make_record

MODELS = 40
ODD_ONE = "m07"  # the model where bfs-refined misses the optimum


def _records(store: RecordStore) -> None:
    for i in range(MODELS):
        model = f"m{i:02d}"
        common = {"input_shapes": [[1, 3, 8, 8]], "export_seconds": 1.0, "partitions": 1 + i % 2}
        counts = {"bfs-downstream": i + 2, "bfs-refined": i + 1 + 2 * (model == ODD_ONE), "ilp": i + 1}
        for strategy, transitions in counts.items():
            extra = {"solve_seconds": 0.01 * i, "variables": 100 * i, "optimal": True} if strategy == "ilp" else {}
            store.append(make_record(model, strategy, "vulkan", "ok", transitions=transitions,
                                     pass_seconds=0.01 * (1 + (strategy != "bfs-downstream") * (1 + i / 10)),
                                     **common, **extra))
    for strategy in ("bfs-downstream", "bfs-refined", "ilp"):
        store.append(make_record("no_export", strategy, "vulkan", "failed", "model 'no_export' failed to export: x",
                                 input_shapes=[[1, 3]]))
        store.append(make_record("no_lowering", strategy, "vulkan", "failed", "RuntimeError: unsupported",
                                 input_shapes=[[1, 3]], export_seconds=1.0))


def test_summary_counts_stages_and_finds_the_misses(tmp_path):
    store = RecordStore(tmp_path)
    _records(store)
    frame = load(tmp_path)
    stages = summary.stages(frame)
    assert stages.to_dict() == {"models": MODELS + 2, "built": MODELS + 2, "exported": MODELS + 1,
                                "lowered": MODELS, "one partition": MODELS // 2, "every strategy ok": MODELS}
    table = summary.per_strategy(frame)
    optimum = sum(range(1, MODELS + 1))
    assert table.loc["ilp", "transitions"] == optimum
    assert table.loc["bfs-refined", "transitions"] == optimum + 2
    assert table.loc["bfs-downstream", "above optimum"] == MODELS
    assert summary.above_optimum(frame, "bfs-refined").to_dict("index") == {ODD_ONE: {"bfs-refined": 10, "ilp": 8}}
    extremes = summary.extremes(frame).set_index("what")["model"]
    assert extremes["slowest ILP solve"] == f"m{MODELS - 1}"
    assert extremes["largest pass time ilp / bfs-downstream"] == f"m{MODELS - 1}"
    assert list(summary.failure_reasons(frame)["count"]) == [1, 1]


def test_report_of_many_models_shows_their_distribution_and_sorts_tables(tmp_path):
    _records(RecordStore(tmp_path))
    html = report.write_report(tmp_path).read_text()
    assert "table.sortable" in html and 'class="sortable"' in html
    assert "Distribution of the change relative to bfs-downstream (vulkan)" in html
    assert "per model (vulkan)" not in html, "40 models: a distribution, not 40 groups of bars"
    markdown = (tmp_path / "report.md").read_text()
    assert "### Where bfs-refined is above the proven optimum" in markdown
    assert "vulkan_change_distribution.svg" in markdown
    table, title = report.largest(relative.values(load(tmp_path), "transitions"), "Transitions")
    assert title == f"Transitions: the {report.TOP_N} largest of {MODELS} models"
    assert len(table) == report.TOP_N and f"m{MODELS - 1}" in table.index and "m00" not in table.index
