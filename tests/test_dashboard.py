"""The asv dashboard: the layout suite's results over two commits, published with
``asv publish`` and opened in headless Chromium.

The results come from the repository's own ``asv.conf.json`` run in the test's Python
environment (``-E existing``, ``--set-commit-hash``) on synthetic_small, so the test needs
no second environment; ``asv run`` with environment creation is what the README documents.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from asv.util import load_json
from matplotlib.image import imread

from harness import cli
from layoutkit.files import cache_root
from harness.results.dashboard import vendor

from .helpers.browser import chromium, rendered_dom, screenshot, served

ROOT = Path(__file__).resolve().parents[1]
ASV = Path(sys.executable).parent / "asv"
SUITE = "bench_vulkan_layout.VulkanLayout"
GRAPHED = f"{SUITE}.track_transitions"


def _asv(*args, env):
    done = subprocess.run([str(ASV), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"asv {args[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    """``asv publish`` output of two commits' results; the directory holding both."""
    work = tmp_path_factory.mktemp("asv")
    config = load_json(ROOT / "asv.conf.json", js_comments=True)
    config.update(
        repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), env_dir=str(work / "env"),
        results_dir=str(work / "results"), html_dir=str(work / "html"),
    )
    conf = work / "asv.conf.json"
    conf.write_text(json.dumps(config))
    env = {
        **os.environ,
        "HOME": str(work),  # asv's machine file goes here, not into the user's home
        "LAYOUTBENCH_CACHE_DIR": str(cache_root()),
        "LAYOUTBENCH_BENCH_MODELS": "synthetic_small",
    }
    _asv("machine", "--yes", "--machine", "ci-test", "--config", str(conf), env=env)
    commits = subprocess.run(["git", "rev-list", "--max-count=2", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    for commit in reversed(commits):
        _asv("run", "--config", str(conf), "--machine", "ci-test", "-E", f"existing:{sys.executable}",
             "--set-commit-hash", commit, "--quick", "--bench", f"^{SUITE}", env=env)
    _asv("publish", "--config", str(conf), env=env)
    assert vendor(work / "html") > 0  # this machine reaches package registries, not CDNs
    return work


@pytest.mark.slow
def test_results_hold_every_strategy_of_the_layout_suite(dashboard):
    results = [p for p in (dashboard / "results" / "ci-test").glob("*.json") if p.name != "machine.json"]
    assert results
    stored = json.loads(results[0].read_text())["results"][GRAPHED]
    values, (models, strategies) = stored[0], stored[1]
    assert models == ["'synthetic_small'"] and len(strategies) >= 6
    assert all(isinstance(v, (int, float)) for v in values)


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="Debian chromium is not installed (make system-deps)")
def test_dashboard_lists_the_suites_and_draws_a_graph(dashboard):
    with served(dashboard / "html") as address:
        index = rendered_dom(address)
        for benchmark in ("track_transitions", "track_transition_bytes", "track_delegate_memory_bytes"):
            assert f"{SUITE}.{benchmark}" in index
        graph_page = f"{address}#{GRAPHED}"
        assert "flot-base" in rendered_dom(graph_page)  # the plot's canvas exists
        png = dashboard / "results" / "dashboard.png"
        screenshot(graph_page, png)
    pixels = imread(png)[..., :3]
    # A drawn graph: axes, gridlines and coloured series, not a blank or text-only page.
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 0.25
    assert coloured.sum() > 500, f"no coloured plot in {png}"
    assert len(np.unique(pixels.reshape(-1, 3).round(2), axis=0)) > 50


def test_the_dashboard_command_points_a_page_at_local_copies_of_its_cdn_assets(tmp_path, capsys):
    page = tmp_path / "index.html"
    address = "https://code.jquery.com/jquery-3.3.1.min.js"
    page.write_text(f'<html><script src="{address}" integrity="sha256-x" crossorigin="anonymous"></script></html>')
    assert cli.main(["dashboard", str(tmp_path)]) == 0
    rewritten = page.read_text()
    assert address not in rewritten and "integrity" not in rewritten
    local = re.search(r'src="([^"]+)"', rewritten).group(1)
    assert (tmp_path / local).read_bytes().startswith(b"/*! jQuery v3.3.1")
    page.write_text('<script src="https://cdn.example.org/x.js"></script>')
    assert cli.main(["dashboard", str(tmp_path)]) == 2
    assert ("loads https://cdn.example.org/x.js, which harness/results/dashboard.py does not know; add it to "
            "CDN_FILES") in capsys.readouterr().err
