"""Hostile waveform archives of the corpus (`make_bad_inputs.py`) whose files obspy reads but
whose data contradict each other or their metadata: a gzipped truncated miniSEED file, two
copies of one recording with other values, a channel sampled 0.4 of a sample off its
station's other channel, and a SAC header 1° from the inventory's position. All are made from
obspy's BW.BGLD test records (`MSEED_10_RECORDS`, 200 Hz) by obspy, deterministically. Each is
a problem, so `--strict` makes it exit 3.

Rows: (input name, what is wrong, writer of OUT/name, `seisctf` command, fragments of the one
line); `make_bad_inputs.CASES` turns them into `Case`s."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
from bad_writers import COORDINATES, MSEED_10_RECORDS, STATIONXML, obspy_data

STRICT = ("ingest", "waveforms", "{input}", "--out", "{out}", "--strict")
SHIFT_S = 0.002  # 0.4 of a 200 Hz sample


def _records():
    import obspy

    return obspy.read(str(obspy_data(MSEED_10_RECORDS)))


def gzipped_truncated(path: Path) -> None:
    """The 10 records cut inside the 6th (as `mseed-truncated.mseed`), gzipped (no name or time
    in the gzip header)."""
    path.write_bytes(gzip.compress(obspy_data(MSEED_10_RECORDS).read_bytes()[:2600], mtime=0))


def conflicting_copies(path: Path) -> None:
    """a.mseed: the records; b-doubled.mseed: the same span with every count doubled."""
    path.mkdir()
    (path / "a.mseed").write_bytes(obspy_data(MSEED_10_RECORDS).read_bytes())
    stream = _records()
    stream[0].data = stream[0].data * 2
    stream.write(str(path / "b-doubled.mseed"), format="MSEED", encoding="STEIM1", reclen=512)


def subsample_shift(path: Path) -> None:
    """EHE.mseed: the records; EHZ.mseed: the same samples as channel EHZ, 2 ms later."""
    path.mkdir()
    (path / "EHE.mseed").write_bytes(obspy_data(MSEED_10_RECORDS).read_bytes())
    stream = _records()
    stream[0].stats.channel = "EHZ"
    stream[0].stats.starttime += SHIFT_S
    stream.write(str(path / "EHZ.mseed"), format="MSEED", encoding="STEIM1", reclen=512)


def sac_coordinates_off(path: Path) -> None:
    """BGLD.sac: the records' first 500 samples as SAC with stla 49, stlo 12, stel 500;
    stations.xml: BW.BGLD at 48°, 12°, 500 m (1° of latitude, 111 km, south of the header)."""
    path.mkdir()
    stream = _records()
    stream[0].data = stream[0].data[:500].astype(np.float32)
    stream[0].stats.sac = {"stla": 49.0, "stlo": 12.0, "stel": 500.0}
    stream.write(str(path / "BGLD.sac"), format="SAC")
    (path / "stations.xml").write_text(STATIONXML.format(coordinates=COORDINATES))


ARCHIVE_CASES = (
    ("mseed-truncated.mseed.gz", "the truncated miniSEED file gzipped (read as obspy.read reads "
     "it: its cut record is found inside)", gzipped_truncated, STRICT,
     ("truncated: the record at byte 2560 needs 512 bytes",)),
    ("mseed-conflicting-copies", "two files of one span of BW.BGLD..EHE, the second with every "
     "count doubled", conflicting_copies, STRICT,
     ("b-doubled.mseed: BW.BGLD..EHE from", "overlaps", "with other values",
      "the store keeps", "a.mseed's samples there")),
    ("mseed-subsample-shift", "BW.BGLD's EHZ starts 0.4 of a sample after its EHE",
     subsample_shift, STRICT,
     ("BW.BGLD..EHZ starts 0.002 s after its grid sample (0.4 of a sample)",)),
    ("sac-coordinates-off", "a SAC header putting BW.BGLD 1° north of its StationXML position",
     sac_coordinates_off,
     ("ingest", "waveforms", "{input}/BGLD.sac", "--inventory", "{input}/stations.xml",
      "--out", "{out}", "--strict"),
     ("its SAC header puts BW.BGLD at (49°, 12°, 500 m)",
      "111195 m from the inventory's (48°, 12°, 500 m)")),
)  # fmt: skip
