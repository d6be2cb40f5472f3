"""The report rules under Snakemake (tests/report/Snakefile feeds them the fixture results),
`snakemake --report`, and the HTML report opened in headless Chromium."""

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image, ImageStat

from robopipe.layout import REPORT_QUALITY_FIGURES
from robopipe.report import FIGURES

pytestmark = pytest.mark.slow

SNAKEFILE = Path(__file__).parent / "Snakefile"
DATASETS = ("demo", "tiny")


def snakemake(workdir: Path, *args: str) -> None:
    cmd = ["snakemake", "-s", str(SNAKEFILE), "-d", str(workdir), "--cores", "2", *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("workflow")
    snakemake(workdir)
    return workdir


def test_rules_write_every_declared_figure(workdir):
    for dataset in DATASETS:
        out = workdir / "results/report" / dataset
        assert sorted(p.stem for p in out.glob("*.svg")) == sorted(FIGURES)
        assert sorted(p.stem for p in out.glob("*.png")) == sorted(FIGURES)
        assert all(p.stat().st_size > 0 for p in out.iterdir() if p.is_file())
        quality = sorted(p.stem for p in (out / "quality").glob("*.svg"))
        assert quality == sorted(REPORT_QUALITY_FIGURES)
    summary = pd.read_csv(workdir / "results/report/summary.csv")
    bench = Path(__file__).parent / "fixtures/bench"
    assert len(summary) == sum(len(list((bench / d).glob("*_n*.json"))) for d in DATASETS)


@pytest.fixture(scope="module")
def html(workdir) -> Path:
    html = workdir / "results/report.html"
    snakemake(workdir, "--report", str(html))
    return html


def test_snakemake_report_embeds_every_figure_and_caption(html):
    text = html.read_text(encoding="utf-8")
    for stem in FIGURES:
        assert f"results/report/demo/{stem}.svg" in text
    assert "robopipe_stream_local_single_cpu_w2_n2.svg" in text
    for stem in REPORT_QUALITY_FIGURES:
        assert f"results/report/demo/quality/{stem}.svg" in text
    for category in ("Conversion", "Dataloading", "Scaling", "Quality"):
        assert f'"{category}"' in text
    assert "decoded video frames/s per node" in text  # a caption
    assert "Datasets in this run: demo, tiny." in text  # the workflow page


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_chromium_renders_the_report(html, tmp_path):
    screenshot = tmp_path / "report.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={screenshot}",
            "--window-size=1400,1000",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    with Image.open(screenshot) as image:
        grey = image.convert("L")
        assert grey.size == (1400, 1000)
        assert ImageStat.Stat(grey).stddev[0] > 20  # text and menus, not a blank page
        assert len(grey.getcolors(maxcolors=256 * 256) or []) > 16
