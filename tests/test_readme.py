"""README's command blocks are commands that exist: every ``layoutbench`` line in a fenced
block parses with the command line's own parser and names only options that command has,
every command has an example, and the cheap ones (nothing external, nothing cleared) run."""

import json
import os
import re
import shlex
import signal
from pathlib import Path

import pytest

from harness import cli
from harness.targets.vulkan.local import runners

README = Path(__file__).resolve().parent.parent / "README.md"
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


def readme_commands(text: str) -> list[list[str]]:
    """The arguments of every ``layoutbench`` line in the fenced blocks of ``text``: lines
    continued with a backslash joined, comments and leading ``NAME=value`` assignments dropped."""
    commands = []
    for block in re.findall(r"^```[\w-]*\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split()
            while words and _ASSIGNMENT.fullmatch(words[0]):
                words.pop(0)
            if words and words[0] == "layoutbench":
                commands.append(shlex.split(" ".join(words), comments=True)[1:])
    return commands


COMMANDS = readme_commands(README.read_text())


def _subcommands() -> dict:
    """Each command's name and its argparse parser."""
    parser = cli._parser()
    return next(a for a in parser._actions if a.choices and a.dest == "command").choices


def _is_cheap(argv: list[str]) -> bool:
    """Whether a README command runs in seconds here and touches nothing outside its working
    directory: listings, what the caches and the runtime are (not clearing or building), and
    a run of synthetic_small on the vulkan target."""
    command, options = argv[0], argv[1:]
    if command == "list":
        return True
    if command == "cache":
        return "--clear" not in options
    if command == "runtime":
        return "build" not in options
    if command == "run":
        models = options[options.index("--models") + 1] if "--models" in options else None
        target = options[options.index("--target") + 1] if "--target" in options else "vulkan"
        return models == "synthetic_small" and target == "vulkan" and not {"--ray", "--costs"} & set(options)
    return False


def test_readme_shows_commands():
    assert len(COMMANDS) >= 10, COMMANDS


def test_every_command_has_an_example_in_the_readme():
    shown = {argv[0] for argv in COMMANDS}
    missing = set(_subcommands()) - shown
    assert not missing, f"README shows no example of: {', '.join(sorted(missing))}"


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_readme_command_parses(argv, capsys):
    try:
        cli._parser().parse_args(argv)
    except SystemExit as error:
        pytest.fail(f"layoutbench {' '.join(argv)}: {capsys.readouterr().err.strip()} (exit {error.code})")
    # argparse also takes an option's unambiguous prefix; README spells options out in full
    subparser = _subcommands()[argv[0]]
    known = {option for action in subparser._actions for option in action.option_strings}
    unknown = [word for word in argv[1:] if word.startswith("--") and word.split("=")[0] not in known]
    assert not unknown, f"layoutbench {argv[0]} has no option {', '.join(unknown)}"


@pytest.mark.parametrize("command", [None, *sorted({argv[0] for argv in COMMANDS})])
def test_help_exists_for_each_command_the_readme_names(command, capsys):
    with pytest.raises(SystemExit) as exited:
        cli._parser().parse_args(([command] if command else []) + ["--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith(f"usage: layoutbench {command or ''}".rstrip())
    if command is None:
        assert all(name in usage for name in _subcommands())


def test_the_parser_rejects_what_does_not_exist(capsys):
    """What makes the two tests above fail on a command or option README made up."""
    for argv in (["frobnicate"], ["run", "--models", "synthetic_small", "--no-such-option"]):
        with pytest.raises(SystemExit) as exited:
            cli._parser().parse_args(argv)
        assert exited.value.code == 2
    assert readme_commands("```sh\nX=1 layoutbench run \\\n  --zoo quick  # all\n```\nlayoutbench not-in-a-block\n") \
        == [["run", "--zoo", "quick"]]


@pytest.fixture(params=[pytest.param("this machine's runtime", marks=pytest.mark.slow), "no runtime"])
def runtime_or_none(request):
    """The cheap commands hold on a machine with a built runtime and on a new one without."""
    if request.param == "no runtime":
        request.getfixturevalue("no_runtime")


def test_the_cheap_readme_commands_run(tmp_path, monkeypatch, capsys, runtime_or_none):
    cheap = [argv for argv in COMMANDS if _is_cheap(argv)]
    assert {argv[0] for argv in cheap} == {"list", "cache", "runtime", "run"}, cheap
    monkeypatch.chdir(tmp_path)  # where a run writes its results directory
    sigterm = signal.getsignal(signal.SIGTERM)  # main() installs its own
    # `runtime` says which runtime vulkan-run would use, exiting 1 where there is none (a new machine)
    expected = {"runtime": 0 if runners.find_runtime(None, os.environ.get(runners.RUNNER_ENV)) else 1}
    try:
        for argv in cheap:
            code = cli.main(argv)
            out, err = capsys.readouterr()
            assert code == expected.get(argv[0], 0), \
                f"layoutbench {' '.join(argv)} exited {code}: {err.strip()[-2000:]}"
            assert out.strip(), f"layoutbench {' '.join(argv)} printed nothing"
            if "--format" in argv and argv[argv.index("--format") + 1] == "json":
                json.loads(out)
    finally:
        signal.signal(signal.SIGTERM, sigterm)
