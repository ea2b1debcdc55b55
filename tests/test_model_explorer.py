"""``explore``: Model Explorer overlays of mobilevit_xs.unfused under bfs-downstream and
ilp-time (an H100's cost table), served by the command as a user runs it, read through the
server's API and opened in headless Chromium; the overlays' node ids against the graph the
ETRecord adapter draws; what the server refuses."""

import contextlib
import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from costmodel.table import load
from harness import cli
from harness.inspection.explain import compare_strategies
from harness.inspection.explorer_ids import drawn_as
from harness.inspection.explorer_server import NO_TOKEN_PAGE
from harness.pipeline.model import pipeline
from harness.results.store import make_record
from harness.targets.vulkan.compile.etrecord import model_edge_graph
from harness.targets.vulkan.compile.metrics import partition_transitions, predicted_gpu_time, transitions
from harness.targets.vulkan.compile.prefix import vulkan_lowering
import strategies

from .helpers.browser import DevTools, chromium
from .helpers.explorer import explore

pytest.importorskip("model_explorer", reason="Model Explorer is not installed (make explorer)")
MODEL, NAMES = "mobilevit_xs.unfused", ("bfs-downstream", "ilp-time")
TABLE = Path(__file__).parents[1] / "docs" / "cost-table" / "h100.json"
# The view docs/model-explorer.md shows, written there where LAYOUTBENCH_WRITE_DOCS=1 (a test
# run otherwise leaves the working tree as it found it).
VIEW = Path(__file__).parents[1] / "docs" / "model-explorer.png"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    out = tmp_path_factory.mktemp("explore")
    with explore(MODEL, "--strategy", NAMES[0], "--vs", NAMES[1], "--costs", str(TABLE), "--out", str(out)) as running:
        yield running


@pytest.fixture(scope="module")
def lowered():
    lowering, table = vulkan_lowering(pipeline(MODEL)), load(TABLE)
    return [lowering.lower(strategies.get_strategy(name), table) for name in NAMES]


def _overlays(served) -> dict[str, dict]:
    """Each overlay as the page reads it (the server's read_text_file), by file name."""
    found = {}
    for path in served.overlays:
        answer = served.api("/api/v1/read_text_file", path=str(path))
        found[path.stem] = json.loads(answer["content"])["forward"]
    return found


def _asked(served, route: str, headers: dict | None = None, **query) -> tuple[int, dict]:
    """The status and the JSON of a GET of the server's ``route``, sent with ``headers``."""
    request = urllib.request.Request(f"{served.root}{route}?{urllib.parse.urlencode(query)}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as refused:
        return refused.code, json.load(refused)


@pytest.mark.slow
def test_the_server_answers_only_its_address_with_the_runs_token_about_the_files_explore_wrote(served, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's own")
    secret.chmod(0o600)
    read, overlay = "/api/v1/read_text_file", str(served.overlays[0])
    assert _asked(served, read, path=str(secret), token=served.token) == (
        403, {"error": "it reads only the overlays explore wrote"})
    assert _asked(served, read, path=overlay)[0] == 403  # no token
    rebound = {"Host": f"evil.example:{urllib.parse.urlsplit(served.root).port}"}
    assert _asked(served, read, rebound, path=overlay, token=served.token)[0] == 403
    with urllib.request.urlopen(served.root, timeout=60) as page:  # the page without the token: where to go
        assert page.read().decode() == NO_TOKEN_PAGE
    with urllib.request.urlopen(served.address, timeout=60) as page:  # the page's first load: the token kept
        cookie = page.headers["Set-Cookie"].split(";")[0]
        assert "<app-root>" in page.read().decode()
    status, answer = _asked(served, read, {"Cookie": cookie}, path=overlay)  # as the page's scripts ask
    assert status == 200 and answer["content"] == Path(overlay).read_text()


def _transition_sources(lowered, edge) -> set[str]:
    sources = set()
    for program in lowered:
        for index, partition in enumerate(program.partitions):
            ids = drawn_as(partition.program.graph, edge)
            sources |= {ids[t.source] for t in partition_transitions(index, partition)}
    return sources


@pytest.mark.slow
def test_every_coloured_node_is_in_the_adapters_graph_and_every_transition_is_coloured(served, lowered):
    graph_ids = {node["id"] for node in served.adapter_graph()["nodes"]}
    overlays = _overlays(served)
    assert len(overlays) == 10  # 4 per strategy (no vulkan-run here: no measured time), 2 between them
    for name, overlay in overlays.items():
        assert overlay["results"], name
        assert set(overlay["results"]) <= graph_ids, f"{name}: {set(overlay['results']) - graph_ids}"
    sources = _transition_sources(lowered, model_edge_graph(pipeline(MODEL)))
    coloured = set(overlays["02-bfs-downstream-transitions"]["results"]) | set(
        overlays["06-ilp-time-transitions"]["results"])
    assert sources and sources <= graph_ids and sources == coloured


@pytest.mark.slow
def test_node_times_add_up_to_the_programs_predicted_time(served, lowered):
    overlays = _overlays(served)
    table = load(TABLE)
    for number, name, program in ((3, NAMES[0], lowered[0]), (7, NAMES[1], lowered[1])):
        nodes = overlays[f"{number:02d}-{name}-predicted"]["results"]
        total_us = sum(result["value"] for result in nodes.values())
        assert total_us == pytest.approx(1000 * predicted_gpu_time(program, table)["predicted_gpu_ms"], rel=1e-3)


SEARCH = "[...document.querySelectorAll('input')].find(e => e.placeholder.startsWith('Search nodes'))"


def _select(page, node: str) -> str:
    """Find ``node`` with the page's search box and select it (Alt+click on the result that is
    the node itself, not one that reads it; it expands its layers); the side panel's text then."""
    page.evaluate(f"(() => {{ const box = {SEARCH}; box.focus(); box.value = {json.dumps(node)}; "
                  "box.dispatchEvent(new Event('input', {bubbles: true})); })()")
    page.wait_for("document.querySelector('span.node-label') !== null")
    selected = f"/NODE INFO[\\s\\S]*?\\bid\\s+{node}\\s/.test(document.body.innerText)"
    for result in range(page.evaluate("document.querySelectorAll('span.node-label').length")):
        page.evaluate(f"document.querySelectorAll('span.node-label')[{result}].dispatchEvent("
                      "new MouseEvent('click', {bubbles: true, altKey: true}))")
        with contextlib.suppress(AssertionError):
            page.wait_for(selected, timeout=10)
            return page.evaluate("document.body.innerText")
    raise AssertionError(f"the page's search found no node {node}")


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="Debian chromium is not installed (make system-deps)")
def test_the_page_draws_the_graph_with_the_overlays_on_the_nodes_that_differ(served, lowered, tmp_path):
    overlays = _overlays(served)
    differing, _ = compare_strategies(*lowered, NAMES)
    edge = model_edge_graph(pipeline(MODEL))
    ids = [drawn_as(p.program.graph, edge) for p in lowered[0].partitions]
    differ = sorted({ids[row.partition][row.node] for row in differing.itertuples()})
    change = overlays["09-bfs-downstream-vs-ilp-time-representation"]["results"]
    time = overlays["10-bfs-downstream-vs-ilp-time-predicted"]["results"]
    assert differ and all(change[node]["value"] != "alike" for node in differ)
    nodes = len(served.adapter_graph()["nodes"])
    with DevTools(served.address) as page:
        page.wait_for(f"/op node count\\s*{nodes}\\b/.test(document.body.innerText)", timeout=120)
        for overlay in overlays.values():  # the providers panel lists every overlay by its legend
            page.wait_for(f"document.body.innerText.includes({json.dumps(overlay['name'])})", timeout=60)
        for node in (differ[0], differ[-1]):  # the page's own panel shows our values on the node
            panel = _select(page, node).split("NODE DATA PROVIDERS")[-1]
            assert change[node]["value"] in panel, (node, panel[:1500])
            assert f"{time[node]['value']:g}" in panel, (node, time[node], panel[:1500])
        page.evaluate("new Promise(done => setTimeout(done, 2000))")  # WebGL draws the expanded layers
        page.screenshot(tmp_path / "view.png")
    if os.environ.get("LAYOUTBENCH_WRITE_DOCS") == "1":
        shutil.copyfile(tmp_path / "view.png", VIEW)


@pytest.mark.slow
def test_the_report_links_each_models_overlay_files(served, capsys):
    results = served.etrecord.parents[2]  # RESULTS/explorer/MODEL/MODEL.etrecord
    (results / "records.jsonl").write_text(json.dumps(make_record(MODEL, NAMES[0], "vulkan", "ok", transitions=11)) + "\n")
    assert cli.main(["report", str(results)]) == 0
    page = (results / "report.html").read_text()
    linked = re.findall(r"<a href='([^']+)'>", page)
    assert sorted((results / href).resolve() for href in linked) == sorted(
        path.resolve() for path in [served.etrecord, *served.overlays])
    assert f"{MODEL}: {NAMES[0]} vs {NAMES[1]}" in page
    assert all(f"]({href})" in (results / "report.md").read_text() for href in linked)


def test_explore_of_an_unknown_model_is_one_line_and_exit_2(capsys):
    assert cli.main(["explore", "no_such_model", "--strategy", "bfs-downstream", "--write-only"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'no_such_model'" in err and err.count("\n") == 1


def test_explore_writes_overlays_whose_transitions_are_the_bytes_the_strategy_moves(tmp_path, capsys):
    """The command's files without its server, on the small model: the transitions overlay
    holds, per source, the KiB its clones move, adding up to what the lowering counts."""
    assert cli.main(["explore", "synthetic_small", "--strategy", "bfs-downstream", "--vs", "bfs-refined",
                     "--write-only", "--out", str(tmp_path)]) == 0
    written = [Path(line) for line in capsys.readouterr().out.split()]
    assert written and all(path.is_file() for path in written)
    [overlay] = [path for path in written if path.name.endswith("bfs-downstream-transitions.json")]
    kib = json.loads(overlay.read_text())["forward"]["results"]
    lowered = vulkan_lowering(pipeline("synthetic_small")).lower(strategies.get_strategy("bfs-downstream"))
    moved = sum(transition.bytes for transition in transitions(lowered))
    assert moved > 0 and sum(value["value"] for value in kib.values()) * 1024 == pytest.approx(moved)
