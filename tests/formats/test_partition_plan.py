"""The plan of any split of a scan into partitions is the plan of the whole scan
(`partition_plan`): each partition of consecutive files is scanned and checked against the
inventory on its own (as a worker would), the rounds run per partition and only their merges
see all of them; stations, channels, grid, problems (text and order), station metadata and
every trace's place on the grid come out equal, and so does the bad input of rates that differ.
Real files: obspy's SAC (header positions, an unknown station), CH.BALST (moves onto the grid),
IM.I59H1 with its StationXML, the synthetic archive's encodings, overlaps and sub-sample start,
a file that is not seismic data."""

from __future__ import annotations

import shutil

import numpy as np
import obspy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_waveform_positions import BALST, LMOW, PIN1, _inventory
from test_waveforms import I59_DATA, I59_XML, write_synthetic_archive

from seisctf.errors import InvalidInput
from seisctf.formats.obspy_archive.inventory_checks import findings, read_source
from seisctf.formats.obspy_archive.partition_plan import accept, make_plan, plan_of_parts
from seisctf.formats.obspy_archive.scan_table import ScanTable, scan_files
from seisctf.location import StoreLocation

FIELDS = ("stations", "channels", "sampling_rate", "start_ns", "n_time", "block_samples",
          "problems", "station_metadata", "own_channels", "offsets")  # fmt: skip


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> dict:
    """Sorted paths of the mixed archive, one scan table per file, and the inventories."""
    root = tmp_path_factory.mktemp("mixed")
    files = write_synthetic_archive(root / "a_synthetic")
    for source, name in ((PIN1, "b_pin1.sac"), (LMOW, "c_lmow.sac"), (BALST, "d_balst.mseed"),
                         (I59_DATA, "e_i59.mseed"), (PIN1, "f_pin1_again.sac")):  # fmt: skip
        shutil.copy(source, root / name)
        files.append(root / name)
    other = obspy.read(str(PIN1))[0]  # a channel the inventory does not have: contradicts it
    other.stats.channel = "LYN"
    other.write(str(root / "bb_pin1_lyn.sac"), format="SAC")
    files.append(root / "bb_pin1_lyn.sac")
    (root / "g_not_data.mseed").write_bytes(b"not seismic data" * 40)
    files.append(root / "g_not_data.mseed")
    odd = obspy.Trace(
        np.zeros(86_400, np.int32),
        {"network": "XX", "station": "ODD", "channel": "LHZ", "sampling_rate": 1.0000371},
    )  # no ratio to 1 Hz
    odd.write(str(root / "h_odd_rate.mseed"), format="MSEED")
    files.append(root / "h_odd_rate.mseed")
    paths = sorted(str(f) for f in files)
    far_pin1 = _inventory(root / "pin1.xml", 34.6, -116.45816, 0.0)  # 111 km off its header
    source = read_source([StoreLocation(I59_XML), StoreLocation(far_pin1)])
    synthetic = [p for p in paths if "a_synthetic" in p or "not_data" in p]
    return {"paths": paths, "tables": [scan_files([p]) for p in paths], "source": source,
            "synthetic": synthetic}  # fmt: skip


def _parts(archive: dict, paths: list[str], cuts: list[int], inventory: bool) -> list:
    """The partitions of `paths` at `cuts`, each scanned and checked on its own."""
    index = {path: k for k, path in enumerate(archive["paths"])}
    bounds = [0, *sorted(set(c % len(paths) for c in cuts) - {0}), len(paths)]
    parts = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        scans = ScanTable.joined([archive["tables"][index[p]] for p in paths[a:b]], paths[a:b])
        found = findings(scans, archive["source"], False) if inventory else None
        parts.append(accept(scans, found))
    return parts


def _whole(archive: dict, paths: list[str], inventory: bool, rate: float | None):
    return _parts(archive, paths, [], inventory)[0].scans, rate


def _outcome(run):
    """The plan's fields and every placed trace, or the bad input's (what, message)."""
    try:
        plan, placed = run()
    except InvalidInput as error:
        return ("bad input", error.what, str(error))
    traces = [trace for part in placed for trace in part]
    coordinates = plan.coordinates.tobytes()  # (NaN where unknown, equal bit for bit)
    return (*(getattr(plan, name) for name in FIELDS), coordinates), traces


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
    case=st.sampled_from([("all", True, 1.0), ("all", True, None), ("all", False, 1.0),
                          ("synthetic", False, None), ("synthetic", True, None)]),
)  # fmt: skip
def test_any_split_of_the_scan_plans_as_the_whole(archive, cuts, case):
    which, inventory, rate = case
    paths = archive["paths"] if which == "all" else archive["synthetic"]
    whole = _parts(archive, paths, [], inventory)
    expected = _outcome(lambda: plan_of_parts(whole, rate))
    got = _outcome(lambda: plan_of_parts(_parts(archive, paths, cuts, inventory), rate))
    assert got == expected


def test_the_mixed_archive_exercises_every_merge(archive):
    """The example is not trivial: its plan has problems of every kind the merges order."""
    (part,) = _parts(archive, archive["paths"], [], True)
    plan, _ = make_plan(part.scans, findings(part.scans, archive["source"], False), rate=1.0)
    text = "\n".join(plan.problems)
    for expected in ("not_data", "unknown station", "of a sample", "from the inventory's",
                     "is not in the inventory",
                     "cannot resample"):  # fmt: skip
        assert expected in text, expected
    with pytest.raises(InvalidInput, match="sampling rates differ"):
        make_plan(part.scans, None)
    assert len(plan.stations) >= 5
    (piece,) = plan.station_metadata  # the stations' metadata in one piece (STATIONS_PER_PIECE)
    assert list(piece.metadata) == list(plan.stations) and piece.metadata["IM.I59H1"]["channels"]
    i59 = plan.stations.index("IM.I59H1")
    assert plan.coordinates.shape == (len(plan.stations), 3)
    assert plan.coordinates[i59].tolist() == [
        piece.metadata["IM.I59H1"][name] for name in ("latitude", "longitude", "elevation")
    ]
