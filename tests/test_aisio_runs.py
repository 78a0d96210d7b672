"""AiSIO's per-run PCIe saturation table (iolab.importers.aisio_runs) and its committed copy.

* The committed table against AiSIO's published means: on every clone (no archive needed).
* The derivation re-run from AiSIO's archive in ``../shared/aisio/`` reproduces the committed
  CSV and YAML byte for byte; skipped, saying why, where the archive is absent.
* A synthesised CIJOE output (test_import_cijoe's) with planted faults: each stops the
  derivation with an error that names the archive's file at fault.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml
from test_import_cijoe import PCIE, make_cijoe, tar_gz

from iolab.errors import InputError, ParseError
from iolab.importers import aisio_runs
from iolab.paths import REPO_ROOT

REFERENCE = REPO_ROOT / "data" / "reference"
RUNS_CSV = REFERENCE / f"{aisio_runs.NAME}.csv"
RUNS_YAML = REFERENCE / f"{aisio_runs.NAME}.yaml"


# --- the committed table ------------------------------------------------------------------

def test_committed_means_agree_with_the_published_ones_within_rounding():
    """AiSIO published its means as whole bytes/s (its barplot data); the means of the runs
    behind them differ from those by the rounding alone (at most half a byte per second)."""
    runs = pd.read_csv(RUNS_CSV)
    published = pd.read_csv(REFERENCE / "aisio_pcie_saturation.csv").set_index("iosize")
    means = runs.groupby("iosize")[["payload_bytes_per_s", "rx_p95_bytes_per_s"]].mean()
    assert list(means.index) == list(published.index) == [512, 4096, 8192]
    assert (runs.groupby("iosize").size() == 5).all()
    difference = (means - published[means.columns]).abs()
    assert (difference <= 0.5).all().all(), difference


def test_committed_provenance_names_the_archive_and_says_whose_values_they_are():
    meta = yaml.safe_load(RUNS_YAML.read_text())
    assert meta["archive"] == {
        "file": "pcie-bandwidth-saturation.tar.gz",
        "sha256": "11841f22c2c59c7393e0e5b8fa39bf0d123fe1cec2b14fa4078bce716fbedb24",
        "repository": "github.com/xnvme/aisio", "commit": "31b032a",
        "path": "artifacts/pcie-bandwidth-saturation.tar.gz"}
    assert meta["source"].startswith("AiSIO's measurements, not this package's")
    assert "published" not in RUNS_YAML.read_text().replace("neither published text", "")
    assert set(meta["columns"]) == set(aisio_runs.COLUMNS) == set(pd.read_csv(RUNS_CSV).columns)
    assert meta["table"] == RUNS_CSV.name
    assert meta["p2p"]["source_file"] == "004_cuda_bandwidth/cmd_01.output"
    assert meta["p2p"]["aisio_reference_gbs"] == pytest.approx(56.135)
    assert meta["p2p"]["p2p_write_gbs"] == pytest.approx((28.00 + 28.77) / 2)
    assert (meta["point"]["ndevs"], meta["point"]["qdepth"], meta["point"]["ncpus"]) == (4, 128, 1)


# --- re-derived from the archive ----------------------------------------------------------

@pytest.mark.skipif(not PCIE.exists(), reason=f"AiSIO's archive {PCIE} not found (public data, "
                    "never committed; see ../shared/aisio/README.md): the committed table "
                    "cannot be re-derived here")
def test_archive_reproduces_the_committed_files(tmp_path):
    csv_path, yaml_path = aisio_runs.write(aisio_runs.derive_runs(PCIE), tmp_path)
    assert csv_path.read_bytes() == RUNS_CSV.read_bytes()
    assert yaml_path.read_bytes() == RUNS_YAML.read_bytes()


# --- malformed input ------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path):
    """A CIJOE output like AiSIO's: two repetitions of one xnvmeperf point and a p2p step,
    every AiSIO result in agreement."""
    return make_cijoe(tmp_path / "src", orphan=False, bad_rep=None)


def derive(folder, tmp_path):
    return aisio_runs.derive_runs(tar_gz(folder, tmp_path / "mini.tar.gz"))


def test_a_clean_archive_gives_one_row_per_run(folder, tmp_path):
    runs = derive(folder, tmp_path)
    assert runs.archive == "mini.tar.gz"
    assert list(runs.table["rep"]) == [0, 1] and set(runs.table["iosize"]) == {512}
    assert runs.table.loc[0, "payload_bytes_per_s"] == pytest.approx(
        (1000000.00 + 1100000.50) * 512 / 2**20 * 2**20, rel=1e-6)
    assert list(runs.table["xnvmeperf_output"]) == ["003_run/cmd_04.output",
                                                     "003_run/cmd_11.output"]
    assert runs.table.loc[0, "rx_p95_bytes_per_s"] == pytest.approx(9087.5)
    assert runs.point["ndevs"] == 2 and runs.point["dcgm_interval_ms"] == 100
    assert runs.p2p["source_file"] == "004_cuda_bandwidth/cmd_01.output"


def test_an_unknown_archive_needs_its_source(folder, tmp_path):
    runs = derive(folder, tmp_path)
    with pytest.raises(InputError, match="mini.tar.gz.*does not know.*--repository and --commit"):
        aisio_runs.write(runs, tmp_path / "out")
    csv_path, yaml_path = aisio_runs.write(runs, tmp_path / "out", "example.org/x", "abc123")
    assert yaml.safe_load(yaml_path.read_text())["archive"]["commit"] == "abc123"


def test_a_truncated_benchmark_output_is_named(folder, tmp_path):
    (folder / "003_run" / "cmd_11.output").write_text("Running xnvmeperf with arguments:\n")
    with pytest.raises(ParseError, match=r"^mini\.tar\.gz:003_run/cmd_11\.output: "):
        derive(folder, tmp_path)


def test_a_malformed_dcgm_capture_is_named(folder, tmp_path):
    (folder / "003_run" / "cmd_08.output").write_text("#Entity PCITX PCIRX\nGPU 0 12 lots\n")
    with pytest.raises(ParseError, match=r"^mini\.tar\.gz:003_run/cmd_08\.output: .*'lots'"):
        derive(folder, tmp_path)


def test_a_malformed_state_is_named(folder, tmp_path):
    (folder / "003_run" / "cmd_04.state").write_text("begin: [unclosed\n")
    with pytest.raises(ParseError, match=r"mini\.tar\.gz:003_run/cmd_04\.state"):
        derive(folder, tmp_path)


def test_a_truncated_p2p_output_is_named(folder, tmp_path):
    p2p = folder / "004_cuda_bandwidth" / "cmd_01.output"
    p2p.write_text(p2p.read_text().split("Bidirectional")[0])
    with pytest.raises(ParseError, match=r"^mini\.tar\.gz:004_cuda_bandwidth/cmd_01\.output: "
                                         r"no section 'Bidirectional"):
        derive(folder, tmp_path)


def test_a_disagreement_with_aisio_stops_the_derivation(tmp_path):
    folder = make_cijoe(tmp_path / "src", orphan=False, bad_rep=1)
    with pytest.raises(InputError, match=r"disagrees with AiSIO's own results: "
                                         r".*turbo1-1\.out.*iops"):
        derive(folder, tmp_path)


def test_a_result_without_its_benchmark_stops_the_derivation(tmp_path):
    folder = make_cijoe(tmp_path / "src", orphan=True, bad_rep=None)
    with pytest.raises(InputError, match=r"turbo1-2\.out has no benchmark output"):
        derive(folder, tmp_path)


def test_the_command_says_which_file_and_exits_non_zero(folder, tmp_path, capsys):
    shutil.rmtree(folder / "004_cuda_bandwidth")
    archive = tar_gz(folder, tmp_path / "mini.tar.gz")
    assert aisio_runs.main(["--archive", str(archive), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: mini.tar.gz: 0 p2pBandwidthLatencyTest outputs")
    assert not (tmp_path / "out").exists()


def test_not_an_archive_is_named(tmp_path):
    bad = tmp_path / "broken.tar.gz"
    bad.write_bytes(b"not a tar")
    with pytest.raises(InputError, match="broken.tar.gz.*not a readable tar archive"):
        aisio_runs.derive_runs(bad)
