"""The SDS tree of `make_archive.py sds` (its docstring says what is written): the layout and
anomalies (`ArchiveSpec`, `plan_anomalies`), one process task per station (`write_station`),
the damage (`damage_file`), the StationXML (`inventory`) and the summary (`write_sds`)."""

from __future__ import annotations

import io
import math
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from archive_signals import Arrival, add_arrivals, background

NETWORK = "XA"
LOCATION = "00"
COMPONENTS = "ZNE"
AZIMUTH_DIP = {"Z": (0.0, -90.0), "N": (0.0, 0.0), "E": (90.0, 0.0)}
DAY_S = 86400
# Station box (degrees) and the larger box of epicentres; crustal P and S speeds (km/s).
STATION_BOX = ((33.0, 36.0), (-119.0, -115.0))
EVENT_BOX = ((32.0, 37.0), (-120.0, -114.0))
VP_KM_S, VS_KM_S = 6.0, 3.5
KM_PER_DEG = 111.19
# Sensor: a 120 s broadband's poles and zeros (rad/s), gain V/(m/s); digitiser counts/V.
SENSOR_POLES = (-0.03701 + 0.03701j, -0.03701 - 0.03701j, -251.3 + 0j, -131.0 + 467.3j,
                -131.0 - 467.3j)  # fmt: skip
SENSOR_ZEROS = (0j, 0j)
SENSOR_GAIN, DIGITISER_GAIN = 1500.0, 4.0e5
DAMAGES = ("truncated", "flipped-bit-quality", "flipped-bit-data-offset")
ANOMALIES = ("gap", "overlap", "mixed_rate", "damaged")
# Per file in the summary's `file_list`.
FILE_KEYS = ("path", "id", "rate", "record_length", "traces", "samples", "samples_written", "bytes")


@dataclass(frozen=True)
class ArchiveSpec:
    """What to write: stations × channels × days at `rate` Hz from `start` (ISO date), the
    generator seed, events per day and how many files carry each anomaly (None: default)."""

    stations: int
    channels: int
    days: int
    rate: float
    seed: int
    start: str = "2024-01-01"
    events_per_day: int = 6
    gaps: int | None = None
    overlaps: int | None = None
    mixed_rate: int | None = None
    damaged: int | None = None

    @property
    def n_files(self) -> int:
        return self.stations * self.channels * self.days

    def counts(self) -> dict[str, int]:
        """Files per anomaly (`ANOMALIES` order); defaults 1 per 25 (gaps, overlaps) or 50."""
        given = (self.gaps, self.overlaps, self.mixed_rate, self.damaged)
        default = (25, 25, 50, 50)
        return {
            name: max(1, self.n_files // per) if value is None else value
            for name, value, per in zip(ANOMALIES, given, default, strict=True)
        }

    def channel_codes(self) -> list[str]:
        return [band_code(self.rate) + "H" + comp for comp in COMPONENTS[: self.channels]]


def band_code(rate: float) -> str:
    """SEED band code of a broadband channel sampled at `rate` Hz."""
    for low, code in ((80.0, "H"), (10.0, "B"), (1.0, "M")):
        if rate >= low:
            return "L" if code == "M" and rate == 1.0 else code
    return "V"


def station_code(index: int) -> str:
    return f"S{index:04d}"


def rng_for(seed: int, *keys: int) -> np.random.Generator:
    """The generator of one (seed, keys…) tuple: every file draws from its own."""
    return np.random.default_rng([seed, *keys])


def station_sites(spec: ArchiveSpec) -> np.ndarray:
    """(stations, 3): latitude, longitude (degrees), elevation (m)."""
    rng = rng_for(spec.seed, 1)
    (la0, la1), (lo0, lo1) = STATION_BOX
    return np.column_stack(
        [rng.uniform(la0, la1, spec.stations), rng.uniform(lo0, lo1, spec.stations),
         rng.uniform(0.0, 2500.0, spec.stations)]
    )  # fmt: skip


def record_length(spec: ArchiveSpec, station: int) -> int:
    """Bytes per miniSEED record of a station: 4096 for station 0, 512 for station 1, else
    drawn (one in three 512)."""
    if station < 2:
        return (4096, 512)[station]
    return 512 if rng_for(spec.seed, 2, station).random() < 1 / 3 else 4096


def start_s(spec: ArchiveSpec) -> float:
    """The first day's midnight, s since 1970."""
    from obspy import UTCDateTime

    return float(UTCDateTime(spec.start).timestamp)


def events(spec: ArchiveSpec) -> np.ndarray:
    """(n, 4): origin time (s since 1970), latitude, longitude (degrees), magnitude."""
    rng = rng_for(spec.seed, 3)
    n = spec.events_per_day * spec.days
    (la0, la1), (lo0, lo1) = EVENT_BOX
    origin = start_s(spec) + rng.uniform(0, spec.days * DAY_S, n)
    return np.column_stack([origin, rng.uniform(la0, la1, n), rng.uniform(lo0, lo1, n),
                            rng.uniform(1.0, 4.5, n)])  # fmt: skip


def station_arrivals(site: np.ndarray, quakes: np.ndarray) -> list[Arrival]:
    """P and S arrivals of every event at a station (flat-earth distance, constant speeds)."""
    dlat = (quakes[:, 1] - site[0]) * KM_PER_DEG
    dlon = (quakes[:, 2] - site[1]) * KM_PER_DEG * math.cos(math.radians(site[0]))
    dist = np.maximum(np.hypot(dlat, dlon), 5.0)
    found = []
    for origin, km, mag in zip(quakes[:, 0], dist, quakes[:, 3], strict=True):
        amplitude = 10 ** (0.9 * mag + 2.5) / km
        tau = 0.5 + 0.6 * mag
        found.append(Arrival(origin + km / VP_KM_S, amplitude, tau, (1.0, 0.35, 0.35)))
        found.append(Arrival(origin + km / VS_KM_S, 2.5 * amplitude, 1.5 * tau, (0.5, 1.0, 0.9)))
    return found


def plan_anomalies(spec: ArchiveSpec) -> dict[tuple[int, int, int], str]:
    """{(station, channel index, day): anomaly}, distinct files drawn with the seed; damage
    kinds cycle through `DAMAGES`."""
    counts = spec.counts()
    total = sum(counts.values())
    if total > spec.n_files:
        raise SystemExit(
            f"make_archive.py: {total} anomalous files asked ({counts}), the tree has only "
            f"{spec.n_files} files; give fewer with --gaps/--overlaps/--mixed-rate/--damaged"
        )
    order = rng_for(spec.seed, 4).permutation(spec.n_files)[:total]
    kinds = [name for name in ANOMALIES for _ in range(counts[name])]
    damaged = iter(DAMAGES * (counts["damaged"] // len(DAMAGES) + 1))
    found = {}
    for flat, kind in zip(order, kinds, strict=True):
        station, rest = divmod(int(flat), spec.channels * spec.days)
        channel, day = divmod(rest, spec.days)
        found[(station, channel, day)] = next(damaged) if kind == "damaged" else kind
    return found


def sds_path(code: str, channel: str, day_start: float) -> str:
    """The SDS path of a day file, relative to the SDS root."""
    from obspy import UTCDateTime

    when = UTCDateTime(day_start)
    name = f"{NETWORK}.{code}.{LOCATION}.{channel}.D.{when.year}.{when.julday:03d}"
    return f"{when.year}/{NETWORK}/{code}/{channel}.D/{name}"


def sample_time(day_start: float, index: int, rate: float):
    """obspy UTCDateTime of sample `index` of a day starting at `day_start` (whole seconds since
    1970), to the nanosecond."""
    from obspy import UTCDateTime

    return UTCDateTime(ns=int(day_start) * 10**9 + round(index * 1e9 / rate))


def segments(kind: str, n: int, rate: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """[(first, stop)) sample ranges of the day signal that the file's traces hold."""
    if kind == "gap":
        first = int(rng.integers(int(0.1 * n), int(0.8 * n)))
        missing = int(rng.uniform(10.0, 1800.0) * rate)
        return [(0, first), (min(first + max(missing, 2), n - 1), n)]
    if kind == "overlap":
        stop = int(rng.integers(int(0.2 * n), int(0.9 * n)))
        twice = max(2, int(rng.uniform(1.0, 120.0) * rate))
        return [(0, stop), (stop - min(twice, stop - 1), n)]
    return [(0, n)]


def write_station(spec: ArchiveSpec, station: int, root: str) -> list[dict]:
    """Write every day file of one station below the SDS `root`: [file entry dict]."""
    import obspy
    from obspy.io.mseed.core import _write_mseed

    anomalies = plan_anomalies(spec)
    site = station_sites(spec)[station]
    arrivals = station_arrivals(site, events(spec))
    level = rng_for(spec.seed, 5, station).uniform(0.5, 2.0)
    reclen = record_length(spec, station)
    code = station_code(station)
    entries = []
    for ci, channel in enumerate(spec.channel_codes()):
        offset = float(rng_for(spec.seed, 6, station, ci).integers(-2000, 2001))
        for day in range(spec.days):
            kind = anomalies.get((station, ci, day), "")
            rate = spec.rate / 2 if kind == "mixed_rate" else spec.rate
            rng = rng_for(spec.seed, 7, station, ci, day)
            day_start = start_s(spec) + day * DAY_S
            n = int(round(DAY_S * rate))
            signal = background(rng, n, rate, level)
            signal += np.float32(offset)
            add_arrivals(signal, rate, day_start, arrivals, ci, rng)
            counts = np.rint(signal).astype(np.int32)
            pieces = segments(kind, n, rate, rng)
            header = {
                "network": NETWORK,
                "station": code,
                "location": LOCATION,
                "channel": channel,
                "sampling_rate": rate,
            }
            starts = [sample_time(day_start, lo, rate) for lo, _ in pieces]
            traces = [
                obspy.Trace(counts[lo:hi], {**header, "starttime": when})
                for (lo, hi), when in zip(pieces, starts, strict=True)
            ]
            buffer = io.BytesIO()
            # What Stream.write(format="MSEED") calls, without its plugin look-up (5 ms a file).
            _write_mseed(obspy.Stream(traces), buffer, encoding="STEIM2", reclen=reclen)
            raw = buffer.getvalue()
            written = sum(hi - lo for lo, hi in pieces)
            entry = {
                "path": sds_path(code, channel, day_start),
                "id": f"{NETWORK}.{code}.{LOCATION}.{channel}",
                "rate": rate,
                "record_length": reclen,
                "traces": len(pieces),
                "samples_written": written,
                "samples": written,
                "anomaly": kind or None,
            }
            if kind in ("gap", "overlap"):
                (_, stop), (first, _) = pieces
                entry["end_of_first"] = str(sample_time(day_start, stop - 1, rate))
                entry["start_of_second"] = str(sample_time(day_start, first, rate))
                entry["anomaly_samples"] = abs(first - stop)
            if kind in DAMAGES:
                raw, entry["samples"] = damage_file(raw, kind, reclen, rng)
            path = Path(root) / entry["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(raw)
            entry["bytes"] = len(raw)
            entries.append(entry)
    return entries


def damage_file(raw: bytes, kind: str, reclen: int, rng: np.random.Generator) -> tuple[bytes, int]:
    """The damaged bytes of a miniSEED file of `reclen`-byte records and the samples a reader
    still decodes from them (all complete records of a truncated file; none of a flipped one,
    checked: obspy's miniSEED reader must fail on it)."""
    from obspy.io.mseed.core import _read_mseed

    n_records = len(raw) // reclen
    if kind == "truncated":
        keep = int(rng.integers(n_records // 2, n_records))
        cut = keep * reclen + int(rng.integers(64, reclen - 64))
        whole = _read_mseed(io.BytesIO(raw[: keep * reclen]), headonly=True) if keep else []
        return raw[:cut], sum(int(trace.stats.npts) for trace in whole)
    damaged = bytearray(raw)
    if kind == "flipped-bit-quality":
        damaged[6] ^= 0x01  # 'D' -> 'E': no longer a miniSEED record
    else:  # the high byte of "beginning of data" (64 -> 320) of a middle record
        damaged[(n_records // 2) * reclen + 44] ^= 0x01
    try:
        with warnings.catch_warnings():  # libmseed's own complaint about the damage
            warnings.simplefilter("ignore")
            _read_mseed(io.BytesIO(bytes(damaged)))
    except Exception:  # noqa: BLE001 - any failure is what the damage is for
        return bytes(damaged), 0
    raise RuntimeError(f"a {kind} file still decodes; the damage did not take")


def inventory(spec: ArchiveSpec):
    """obspy Inventory of every station and channel (nominal rate, response)."""
    from obspy import UTCDateTime
    from obspy.core.inventory import Channel, Inventory, Network, Response, Site, Station

    opened = UTCDateTime(spec.start) - 365 * DAY_S
    s = 2j * np.pi * 1.0  # normalised to 1 at 1 Hz: the sensitivity is the gain there
    a0 = 1.0 / abs(np.prod([s - z for z in SENSOR_ZEROS]) / np.prod([s - p for p in SENSOR_POLES]))
    response = Response.from_paz(
        list(SENSOR_ZEROS), list(SENSOR_POLES), SENSOR_GAIN * DIGITISER_GAIN,
        input_units="M/S", output_units="COUNTS", normalization_factor=float(a0),
    )  # fmt: skip
    stations = []
    for index, (lat, lon, elev) in enumerate(station_sites(spec)):
        channels = [
            Channel(
                code,
                LOCATION,
                float(lat),
                float(lon),
                float(elev),
                0.0,
                azimuth=AZIMUTH_DIP[code[-1]][0],
                dip=AZIMUTH_DIP[code[-1]][1],
                sample_rate=spec.rate,
                start_date=opened,
                response=response,
            )
            for code in spec.channel_codes()
        ]
        stations.append(
            Station(
                station_code(index),
                float(lat),
                float(lon),
                float(elev),
                channels=channels,
                site=Site(name=f"synthetic station {index}"),
                start_date=opened,
            )
        )
    network = Network(NETWORK, stations=stations, description="seisctf synthetic archive")
    # `created`: the archive's start, so the file's bytes depend on the arguments alone.
    return Inventory(networks=[network], source="seisctf benchmarks/make_archive.py",
                     created=UTCDateTime(spec.start))  # fmt: skip


def write_sds(out: Path, spec: ArchiveSpec, workers: int) -> dict:
    """Write OUT/sds, OUT/stations.xml; the summary (make_archive's docstring) without timing."""
    if min(spec.stations, spec.channels, spec.days) < 1 or spec.stations > 10000:
        raise SystemExit("make_archive.py: 1 ≤ --stations ≤ 10000, --channels, --days ≥ 1")
    if spec.rate <= 0 or DAY_S * spec.rate != int(DAY_S * spec.rate):
        raise SystemExit("make_archive.py: --rate must give a whole number of samples a day")
    plan_anomalies(spec)  # checks the counts before any work
    root = out / "sds"
    root.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        jobs = [pool.submit(write_station, spec, s, str(root)) for s in range(spec.stations)]
        files = [entry for job in jobs for entry in job.result()]
    inventory(spec).write(str(out / "stations.xml"), format="STATIONXML")
    for entry in files:
        entry["path"] = f"sds/{entry['path']}"

    def listed(kind: str, *keys: str) -> list[dict]:
        return [
            {"path": e["path"], "id": e["id"], **{k: e[k] for k in keys}}
            for e in files
            if e["anomaly"] == kind or (kind == "damaged" and e["anomaly"] in DAMAGES)
        ]

    return {
        "arguments": {**spec.__dict__, "counts": spec.counts()},
        "sds_root": "sds",
        "inventory": "stations.xml",
        "files": len(files),
        "bytes": sum(e["bytes"] for e in files),
        "samples": sum(e["samples"] for e in files),
        "samples_written": sum(e["samples_written"] for e in files),
        "record_lengths": {
            f"{NETWORK}.{station_code(s)}.{LOCATION}": record_length(spec, s)
            for s in range(spec.stations)
        },
        "gaps": listed("gap", "end_of_first", "start_of_second", "anomaly_samples"),
        "overlaps": listed("overlap", "end_of_first", "start_of_second", "anomaly_samples"),
        "mixed_rate": listed("mixed_rate", "rate"),
        "damaged": [
            {**{k: v for k, v in d.items() if k != "anomaly"}, "damage": d["anomaly"]}
            for d in listed("damaged", "anomaly", "samples")
        ],
        "file_list": [{k: e[k] for k in FILE_KEYS} for e in files],
    }
