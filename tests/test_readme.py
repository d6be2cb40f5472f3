"""The README's commands and the docs' links, checked where that is cheap.

Every fenced ``bash`` block of ``README.md`` is cut into command lines (backslash
continuations joined, comments dropped, ``&&`` / ``;`` chains split) and each command is
checked by its kind:

- ``snakemake ...`` runs as a dry run (``-n`` added) in the repository root and must exit 0.
  Its ``--configfile`` files must exist; a command whose config names ``../shared/datasets``
  is skipped where that folder is absent. A ``--workflow-profile`` must name a folder of
  ``profiles/``; under ``--executor slurm`` the dry run needs no SLURM daemon.
  ``--report FILE`` needs a finished run, so it is dropped from the dry run, and the option
  must be one Snakemake knows.
- ``bash tools/X.sh ...``: the script exists and ``bash -n`` parses it.
- ``python -m pytest ...``: every path it names exists.

Any other command fails, so that a new kind of README command gets a check here first.

Every relative link of ``README.md`` and ``docs/**/*.md`` must point at an existing file, and a
link's ``#anchor`` at a heading of the Markdown file it names; the README links every page of
``docs/`` and has at most 200 lines.

The README's layout claim holds: each rule of ``workflow/rules/*.smk`` runs the script of its
own name (``script: "../../scripts/<rule>.py"``), and each script of ``scripts/`` serves a rule.

Dry runs write only into ``.snakemake/`` of the repository root (git-ignored).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# one pytest-xdist worker runs these: their snakemake commands share the repository's own
# directory (and its .snakemake/)
pytestmark = pytest.mark.xdist_group("repo_root")

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
RULE_FILES = REPO_ROOT / "workflow" / "rules"
SCRIPTS = REPO_ROOT / "scripts"
DOCS = REPO_ROOT / "docs"
SHARED_DATASETS = REPO_ROOT.parent / "shared" / "datasets"
README_MAX_LINES = 200
DRY_RUN_TIMEOUT_S = 300
CHAIN_OPERATORS = ("&&", "||", ";")
FENCE = re.compile(r"^```(\w*)\s*\n(.*?)^```\s*$", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`[^`\n]*`")


def bash_blocks(markdown: str) -> list[str]:
    """The bodies of the fenced code blocks tagged ``bash``, in order."""
    return [body for lang, body in FENCE.findall(markdown) if lang == "bash"]


def commands(block: str) -> list[list[str]]:
    """The commands of a bash block, each as its shell words: continuations joined, comments
    dropped, chains (``a && b``, ``a; b``) split into their commands."""
    out: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for word in lexer:
            if word in CHAIN_OPERATORS:
                out.append(current)
                current = []
            else:
                current.append(word)
        out.append(current)
    return [c for c in out if c]


def readme_commands() -> list[list[str]]:
    """Every command of the README's bash blocks, once each, in order."""
    out: list[list[str]] = []
    for block in bash_blocks(README.read_text("utf-8")):
        out.extend(c for c in commands(block) if c not in out)
    return out


def option_values(words: list[str], option: str) -> list[str]:
    """The values following ``option`` up to the next option (``--configfile`` takes several)."""
    values: list[str] = []
    for i, word in enumerate(words):
        if word == option:
            for value in words[i + 1 :]:
                if value.startswith("-"):
                    break
                values.append(value)
        elif word.startswith(option + "="):
            values.append(word.split("=", 1)[1])
    return values


def without_option(words: list[str], option: str) -> list[str]:
    """``words`` without ``option`` and the one value that follows it."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            if not word.startswith("-"):
                continue
        if word == option:
            skip = True
            continue
        if word.startswith(option + "="):
            continue
        out.append(word)
    return out


def run(args: list[str], timeout: int = DRY_RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    """``args`` in the repository root, with this checkout's ``src/`` importable first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT / "src"), env.get("PYTHONPATH")) if p
    )
    return subprocess.run(
        args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def check_snakemake(words: list[str]) -> None:
    args = words[1:]
    configs = option_values(args, "--configfile")
    for config in configs:
        path = REPO_ROOT / config
        assert path.is_file(), f"--configfile {config} does not exist"
        if "../shared/datasets" in path.read_text("utf-8") and not SHARED_DATASETS.is_dir():
            pytest.skip(f"{config} names ../shared/datasets, which is absent here")
    for profile in option_values(args, "--workflow-profile"):
        assert (REPO_ROOT / "profiles" / profile).is_dir() or (REPO_ROOT / profile).is_dir(), (
            f"--workflow-profile {profile}: no profiles/{profile}/"
        )
    if "--report" in args or any(a.startswith("--report=") for a in args):
        report = option_values(args, "--report")
        assert not report or report[0].endswith((".html", ".zip")), report
        known = run([sys.executable, "-m", "snakemake", "--help"], timeout=120)
        assert "--report" in known.stdout
        args = without_option(args, "--report")
    if not {"-n", "--dry-run", "--dryrun"} & set(args):
        args = [*args, "-n"]
    result = run([sys.executable, "-m", "snakemake", *args])
    assert result.returncode == 0, (
        f"snakemake {shlex.join(args)} exited {result.returncode}:\n"
        + (result.stdout + result.stderr)[-4000:]
    )


def check_bash_script(words: list[str]) -> None:
    script = REPO_ROOT / words[1]
    assert script.is_file(), f"{words[1]} does not exist"
    result = run(["bash", "-n", str(script)], timeout=60)
    assert result.returncode == 0, result.stderr


def check_pytest(words: list[str]) -> None:
    for word in words[3:]:
        if word.startswith("-"):
            continue
        path = word.split("::", 1)[0]
        assert (REPO_ROOT / path).exists(), f"pytest path {path} does not exist"


def check_command(words: list[str]) -> None:
    """Check one README command by its kind (see the module docstring)."""
    if words[0] == "snakemake":
        check_snakemake(words)
    elif words[0] == "bash" and len(words) > 1 and words[1].startswith("tools/"):
        check_bash_script(words)
    elif words[:3] == ["python", "-m", "pytest"]:
        check_pytest(words)
    else:
        pytest.fail(f"no check for README command {shlex.join(words)!r}: add one here")


COMMANDS = readme_commands()


def test_the_readme_has_commands():
    kinds = {c[0] for c in COMMANDS}
    assert {"snakemake", "bash", "python"} <= kinds
    assert ["bash", "tools/install.sh"] in COMMANDS and ["snakemake"] in COMMANDS


@pytest.mark.parametrize("words", COMMANDS, ids=[shlex.join(c)[:80] for c in COMMANDS])
def test_readme_command(words):
    check_command(words)


def test_commands_are_cut_as_the_shell_would():
    block = (
        "bash tools/install.sh && snakemake   # set up && run\n"
        "snakemake --executor slurm \\\n    --slurm-status-command squeue\n"
        "snakemake -n; snakemake --config slurm='{one_job_episodes: 5}'\n"
    )
    assert commands(block) == [
        ["bash", "tools/install.sh"],
        ["snakemake"],
        ["snakemake", "--executor", "slurm", "--slurm-status-command", "squeue"],
        ["snakemake", "-n"],
        ["snakemake", "--config", "slurm={one_job_episodes: 5}"],
    ]
    args = ["--report", "results/report.html", "--cores", "1"]
    assert without_option(args, "--report") == ["--cores", "1"]
    assert option_values(["convert", "--configfile", "a.yaml", "b.yaml", "-n"], "--configfile") == [
        "a.yaml",
        "b.yaml",
    ]


def test_readme_is_a_front_page():
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_links_every_docs_page():
    targets = {Path(t.split("#", 1)[0]) for t in links(README.read_text("utf-8"))}
    pages = {p.relative_to(REPO_ROOT) for p in DOCS.glob("*.md")}
    assert pages, "docs/ has no pages"
    assert pages <= targets, f"not linked from README.md: {sorted(map(str, pages - targets))}"


def markdown_files() -> list[Path]:
    """The README and every page of ``docs/``, ``docs/figures/`` included."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose(markdown: str) -> str:
    """The Markdown without fenced code blocks and inline code (links there are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", markdown))


def links(markdown: str) -> list[str]:
    """The link and image targets of a Markdown text, outside code."""
    return LINK.findall(prose(markdown))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown text (repeated headings get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in FENCE.sub("", markdown).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_point_at_existing_files(page):
    broken = []
    for target in links(page.read_text("utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text("utf-8")):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO_ROOT)}")
    assert not broken, f"{page.relative_to(REPO_ROOT)}: " + "; ".join(broken)


def rule_scripts(smk: str) -> dict[str, str]:
    """``{rule: the path its script: directive names}`` of a rule file's text."""
    scripts: dict[str, str] = {}
    rule = None
    lines = smk.splitlines()
    for i, line in enumerate(lines):
        if match := re.match(r"^(?:rule|checkpoint) (\w+):", line):
            rule = match.group(1)
        elif line.strip() == "script:":
            scripts[rule] = lines[i + 1].strip().strip("\"'")
    return scripts


def test_each_rule_runs_the_script_of_its_name():
    scripts = {}
    for smk in sorted(RULE_FILES.glob("*.smk")):
        scripts.update(rule_scripts(smk.read_text("utf-8")))
    assert scripts, "no rule runs a script"
    wrong = {rule: path for rule, path in scripts.items() if path != f"../../scripts/{rule}.py"}
    assert not wrong, f"rules whose script is not scripts/<rule>.py: {wrong}"
    unused = sorted(p.name for p in SCRIPTS.glob("*.py") if p.stem not in scripts)
    assert not unused, f"scripts that no rule runs: {unused}"


def test_rule_scripts_are_read_from_the_rule_file():
    smk = 'rule a:\n    input:\n        "x",\n    script:\n        "../../scripts/a.py"\n\n\n'
    smk += 'checkpoint b:\n    script:\n        "../../scripts/c.py"\n\n\nrule all:\n    input:\n'
    assert rule_scripts(smk) == {"a": "../../scripts/a.py", "b": "../../scripts/c.py"}


def test_anchors_are_githubs():
    assert slug("The source check's cost") == "the-source-checks-cost"
    assert slug("Compatibility with lerobot 0.6.1") == "compatibility-with-lerobot-061"
    assert slug("`bench`") == "bench"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
