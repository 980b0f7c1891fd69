"""`seisctf.catalogs.seisbench_dataset`: an event-window store as a SeisBench WaveformDataset.
Compared value for value with SeisBench's own `WaveformDataset` on the folder the store was
ingested from: metadata, splits, filters, waveforms, samples, and every sample of the training
tutorial's generator through DataLoaders of 0, 2 and 4 workers; on S3 too (SeaweedFS), where
a batch reads a small part of the store, counted by the filesystem's real reads."""

from __future__ import annotations

import copy
import http.client
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pytest
import seisbench.generate as sbg
import zarr
from event_window_fixtures import assert_same_batches, write_training_seisbench
from event_window_fixtures import loader_batches as batches
from event_window_fixtures import seisbench_original as original
from servers import SlowLink

from seisctf import s3, storage
from seisctf.catalogs import BatchReads, phasenet_loader, phasenet_loss, seisbench_dataset
from seisctf.catalogs.byte_ranges import LocalRanges, SignedRanges
from seisctf.catalogs.window_reader import WindowReader, chunk_layout
from seisctf.errors import InvalidInput
from seisctf.formats.seisbench.ingest import ingest_seisbench
from seisctf.location import StoreLocation

logging.getLogger("seisbench").setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def training_dir(tmp_path_factory):
    return write_training_seisbench(tmp_path_factory.mktemp("training"))


@pytest.fixture(scope="module")
def training_store(training_dir, tmp_path_factory) -> str:
    url = str(tmp_path_factory.mktemp("stores") / "training.zarr")
    ingest_seisbench(str(training_dir), StoreLocation(url), shard_traces=8, quiet=True)
    return url


def train_steps(
    dataset, *, steps: int, seed: int, batch_size: int, window_samples: int
) -> list[float]:
    """Losses of `steps` Adam steps of a randomly initialised PhaseNet (torch seed `seed`, CPU)
    on `phasenet_loader(dataset, seed=seed)`: the README's training loop. On one torch thread,
    so that the order of a sum cannot vary between the two runs compared (in one full run the
    first-step losses of store and original differed in their sixth digit, with more threads)."""
    import seisbench.models as sbm
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = sbm.PhaseNet(phases="PSN", norm="peak")
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
        losses: list[float] = []
        loader = phasenet_loader(
            dataset, batch_size=batch_size, seed=seed, window_samples=window_samples
        )
        for batch in loader:
            loss = phasenet_loss(model(batch["X"]), batch["y"])
            optimiser.zero_grad(), loss.backward(), optimiser.step()
            losses.append(float(loss.detach()))
            if len(losses) == steps:
                break
        return losses
    finally:
        torch.set_num_threads(threads)


def test_metadata_and_splits_are_seisbench_s(training_dir, training_store):
    ours, theirs = seisbench_dataset(training_store), original(training_dir)
    assert len(ours) == len(theirs) == 48
    assert ours.chunks == ["a", "b"]
    # the store's windows are all in its component order (ENZ traces were reordered at ingest)
    assert set(ours.metadata["trace_component_order"]) == {"ZNE"}
    for column in theirs.metadata.columns.drop(["index", "trace_component_order"]):
        mine, want = ours.metadata[column], theirs.metadata[column]
        assert mine.dtype == want.dtype, column
        if pd.api.types.is_numeric_dtype(want.dtype):
            np.testing.assert_array_equal(mine.to_numpy(), want.to_numpy(), err_msg=column)
        else:
            assert mine.astype(str).tolist() == want.astype(str).tolist(), column
    for i in (0, 5, 47):  # the columnar row lookup gives pandas' rows, value and type
        row, frame_row = ours._metadata_lookup[i], ours.metadata.iloc[i].to_dict()
        assert list(row) == list(frame_row)
        for key, value in frame_row.items():
            assert type(row[key]) is type(value), key
            assert row[key] == value or (pd.isna(value) and pd.isna(row[key])), key
    for split in ("train", "dev", "test"):
        mine, want = ours.get_split(split), theirs.get_split(split)
        assert mine.metadata["trace_name"].tolist() == want.metadata["trace_name"].tolist()
        np.testing.assert_array_equal(mine.get_waveforms(), want.get_waveforms())
    mask = (theirs.metadata["source_magnitude"] > 2).to_numpy()
    mine, want = ours.filter(mask, inplace=False), theirs.filter(mask, inplace=False)
    assert 0 < len(mine) == len(want) < len(theirs)
    name, chunk = want.metadata[["trace_name", "trace_chunk"]].iloc[-2]
    assert mine.get_idx_from_trace_name(name, chunk) == want.get_idx_from_trace_name(name, chunk)
    np.testing.assert_array_equal(mine.get_waveforms([3, 0, 3]), want.get_waveforms([3, 0, 3]))


def test_a_metadata_row_deep_copies_like_a_dict(training_store):
    """SeisBench's augmentations deep-copy the metadata at almost every step and some change
    array values in place (windows of grouped samples, gaps): a copy shares only immutable
    values, so such a change never reaches the row it came from."""
    row = seisbench_dataset(training_store).get_sample(5)[1]
    row["trace_p_arrival_sample"] = np.array([100.0, 300.0])
    twin = copy.deepcopy(row)
    assert type(twin) is type(row) and list(twin) == list(row)
    plain = copy.deepcopy(dict(row))
    for key, value in plain.items():
        assert type(twin[key]) is type(value), key
        np.testing.assert_array_equal(twin[key], value, err_msg=key)
    twin["trace_p_arrival_sample"][0] += 7
    twin["trace_name"] = "changed"
    np.testing.assert_array_equal(row["trace_p_arrival_sample"], [100.0, 300.0])
    assert row["trace_name"] == plain["trace_name"] != "changed"
    assert twin["source_origin_time"] is row["source_origin_time"]  # immutable: shared


@pytest.mark.parametrize(
    "options",
    [{}, {"sampling_rate": 50.0}, {"component_order": "ENZ", "dimension_order": "NWC"}],
    ids=["native", "resampled", "reordered"],
)
def test_waveforms_and_samples_equal_seisbench_s(training_dir, training_store, options):
    ours, theirs = seisbench_dataset(training_store, **options), original(training_dir)
    theirs.component_order = options.get("component_order", "ZNE")
    theirs.dimension_order = options.get("dimension_order", "NCW")
    theirs.sampling_rate = options.get("sampling_rate")
    np.testing.assert_array_equal(ours.get_waveforms(), theirs.get_waveforms())
    np.testing.assert_array_equal(ours.get_waveforms(7), theirs.get_waveforms(7))
    np.testing.assert_array_equal(ours.get_waveforms([9, 2]), theirs.get_waveforms([9, 2]))
    mask = np.arange(len(theirs)) % 5 == 1
    np.testing.assert_array_equal(ours.get_waveforms(mask=mask), theirs.get_waveforms(mask=mask))
    for i in range(len(theirs)):
        (mine, mine_meta), (want, want_meta) = ours.get_sample(i), theirs.get_sample(i)
        assert mine.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(mine, want)
        for key in ("trace_p_arrival_sample", "trace_s_arrival_sample", "trace_npts"):
            np.testing.assert_array_equal(mine_meta[key], want_meta[key], err_msg=key)
        assert mine_meta["trace_sampling_rate_hz"] == want_meta["trace_sampling_rate_hz"]
    ours.get_sample(3)[0][...] = 0  # the caller's own array: reading it again is untouched
    np.testing.assert_array_equal(ours.get_sample(3)[0], theirs.get_sample(3)[0])


@pytest.mark.parametrize(
    ("num_workers", "batch_reads"),
    [(0, False), (0, True), (2, True), (4, True)],
    ids=["0-per-sample", "0-batch-reads", "2-batch-reads", "4-batch-reads"],
)
def test_generator_batches_equal_seisbench_s(
    training_dir, training_store, num_workers, batch_reads
):
    """SeisBench's own pipeline (plain GenericGenerator + DataLoader) on its dataset gives the
    batches of the store's, with or without `BatchReads`."""
    ours = seisbench_dataset(training_store)  # all 48 windows, 6 batches, every augmentation
    expected = batches(original(training_dir), 11, num_workers, batch_reads=False)
    assert_same_batches(expected, batches(ours, 11, num_workers, batch_reads=batch_reads))


@pytest.fixture(scope="module")
def s3_training_store(training_dir, s3_server) -> str:
    fs = s3_server.filesystem()
    fs.mkdir("training")
    url = "s3://training/training.zarr"
    ingest_seisbench(
        str(training_dir), StoreLocation(url, s3_server.storage_options), shard_traces=8, quiet=True
    )
    return url


class CountingS3(s3.WatchedS3FileSystem):
    """seisctf's s3fs counting the requests and bytes of its reads (class-wide); built on
    seisctf's class, which seisctf keeps registered for s3:// (`s3.watch_s3_urls`)."""

    read_bytes = 0
    requests = 0

    async def _cat_file(self, path, *args, **kwargs):
        data = await super()._cat_file(path, *args, **kwargs)
        type(self).read_bytes += len(data)
        type(self).requests += 1
        return data


class CountingConnection(http.client.HTTPConnection):
    """http.client's connection counting the answers and their bytes (Content-Length), and the
    most requests sent and not yet answered at once (class-wide)."""

    read_bytes = requests = in_flight = most_in_flight = 0
    lock = threading.Lock()

    def request(self, *args, **kwargs):
        super().request(*args, **kwargs)
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most_in_flight = max(cls.most_in_flight, cls.in_flight)

    def getresponse(self):
        response = super().getresponse()
        cls = type(self)
        with cls.lock:
            cls.in_flight -= 1
            cls.requests += 1
            cls.read_bytes += int(response.getheader("Content-Length") or 0)
        return response


@pytest.mark.parametrize("signed_urls", [False, True], ids=["s3fs", "signed-urls"])
def test_on_s3_a_batch_reads_a_small_part_of_the_store(
    s3_training_store, s3_server, training_dir, request, monkeypatch, signed_urls
):
    import fsspec

    fsspec.register_implementation("s3", CountingS3, clobber=True)
    request.addfinalizer(
        lambda: fsspec.register_implementation("s3", s3.WatchedS3FileSystem, clobber=True)
    )
    monkeypatch.setattr(SignedRanges, "CONNECTION_CLASS", CountingConnection)
    counter = CountingConnection if signed_urls else CountingS3
    options = s3_server.storage_options
    dataset = seisbench_dataset(
        s3_training_store, options, cache_bytes=2**20, signed_urls=signed_urls
    )
    store_bytes = sum(
        info["size"]
        for info in s3_server.filesystem().find(s3_training_store, detail=True).values()
        if "/waveforms/" in info["name"]
    )
    CountingS3.read_bytes = CountingS3.requests = 0
    CountingConnection.read_bytes = CountingConnection.requests = 0
    rows = [3, 40, 17, 29]
    np.testing.assert_array_equal(
        dataset.get_waveforms(rows), original(training_dir).get_waveforms(rows)
    )
    # four windows and the indexes of their four shards, nothing else of the waveforms
    first = counter.read_bytes
    assert 0 < first < store_bytes / 4
    assert counter.requests == 8
    assert (CountingS3 if signed_urls else CountingConnection).requests == 0  # the other path
    dataset.get_waveforms(rows)  # all in the cache now
    assert counter.read_bytes == first
    assert dataset._reader.cached_bytes <= 2**20


def test_a_batch_on_s3_reads_its_windows_concurrently_then_from_the_cache(
    s3_training_store, s3_server, training_dir, monkeypatch
):
    """`BatchReads`: a batch's 6 windows in 6 shards are read at once (indexes, then windows:
    12 GETs, all of a step sent before the first answer is read), after which making its
    samples reads nothing; the samples are SeisBench's. Through a link that holds each request
    `delay_s`: one GET after the other would take 12 delays, two steps take about two."""
    monkeypatch.setattr(SignedRanges, "CONNECTION_CLASS", CountingConnection)
    delay_s = 0.3  # 2 delays, then 4 more for the rest of the work on a loaded machine
    endpoint = urlsplit(s3_server.endpoint_url)
    link = SlowLink((endpoint.hostname, endpoint.port), delay_s)
    far = {**s3_server.storage_options, "endpoint_url": "http://{}:{}".format(*link.address)}
    try:
        dataset = seisbench_dataset(s3_training_store, far)
        generator = BatchReads(sbg.GenericGenerator(dataset))
        CountingConnection.read_bytes = CountingConnection.requests = 0
        CountingConnection.most_in_flight = 0
        indices = [1, 9, 17, 25, 33, 41]  # shards of 8 windows: one window in each of 6
        began = time.perf_counter()
        dataset.prefetch(indices)
        seconds = time.perf_counter() - began
        assert CountingConnection.requests == 12
        assert CountingConnection.most_in_flight == 6
        assert 2 * delay_s <= seconds < 6 * delay_s
        samples = generator.__getitems__(indices)
        assert CountingConnection.requests == 12  # every window came from the cache
    finally:
        link.close()
    want = original(training_dir)
    for idx, sample in zip(indices, samples, strict=True):
        np.testing.assert_array_equal(sample["X"], want.get_sample(idx)[0])


def test_a_prefetched_batch_is_held_beside_the_cache_until_the_next(
    training_store, training_dir, monkeypatch
):
    """`BatchReads` on a local store: a batch's windows are read once, at once, and held for
    making its samples, not put in the cache (a training epoch reads each window once), which
    keeps only the shard indexes; the next batch's windows replace them."""
    reads = []
    read = LocalRanges._read
    monkeypatch.setattr(
        LocalRanges, "_read", lambda self, *where: reads.append(where) or read(self, *where)
    )
    dataset = seisbench_dataset(training_store)
    reader = dataset._reader
    generator = BatchReads(sbg.GenericGenerator(dataset))
    index_bytes = reader.layout.chunks_per_shard * 16  # (offset, nbytes) a chunk, uint64
    first, second = [1, 9, 17], [2, 10]  # shards of 8 windows: 0, 1, 2; then 0, 1 again
    samples = generator.__getitems__(first) + generator.__getitems__(second)
    assert len(reads) == 3 + 3 + 2  # three indexes, then every window once
    assert reader.cached_bytes == 3 * index_bytes
    assert sorted(reader._batch) == [row // reader.layout.chunk_traces for row in second]
    want = original(training_dir)
    for idx, sample in zip(first + second, samples, strict=True):
        np.testing.assert_array_equal(sample["X"], want.get_sample(idx)[0])
    dataset.get_sample(9)  # not in the held batch: read again, and kept in the cache now
    assert len(reads) == 9 and reader.cached_bytes > 3 * index_bytes


def test_forked_workers_on_s3_give_the_samples_of_one_process(
    s3_training_store, s3_server, training_dir
):
    import torch

    train = seisbench_dataset(s3_training_store, s3_server.storage_options).train()
    train.get_sample(0)  # the parent's handles exist before the fork
    assert_same_batches(batches(original(training_dir).train(), 5, 2), batches(train, 5, 2))
    fixed = sbg.GenericGenerator(train)  # no random draw: any number of workers, same batches
    fixed.add_augmentations([sbg.FixedWindow(p0=0, windowlen=3000, strategy="pad")])
    one, two = (
        [batch["X"].numpy() for batch in torch.utils.data.DataLoader(fixed, 4, num_workers=n)]
        for n in (0, 2)
    )
    assert_same_batches([{"X": x} for x in one], [{"X": x} for x in two])


def test_readers_pickle_without_their_handles(training_store):
    reader = WindowReader(StoreLocation(training_store), cache_bytes=4096)
    reader.read([1, 2])
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._fs is None and copy.cached_bytes == 0
    np.testing.assert_array_equal(copy.read([2, 1]), reader.read([2, 1]))
    assert 0 < reader.cached_bytes <= 4096


def test_what_is_not_an_event_window_store_is_refused_by_name(tmp_path):
    with pytest.raises(InvalidInput, match="nothing.zarr: no zarr group"):
        seisbench_dataset(str(tmp_path / "nothing.zarr"))
    url = str(tmp_path / "other.zarr")
    zarr.open_group(url, mode="w", zarr_format=3)
    storage.finish_group(StoreLocation(url), {"sampling_rate": 100.0})  # complete, but no windows
    with pytest.raises(InvalidInput, match="other.zarr/waveforms: no zarr v3 array"):
        seisbench_dataset(url)


def test_layouts_seisctf_does_not_write_are_refused_by_name():
    description = {
        "shape": [4, 3, 10],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 3, 10]}},
        "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
    }
    with pytest.raises(InvalidInput, match="store.zarr/waveforms: unsupported chunk codecs"):
        chunk_layout(description, "store.zarr/waveforms")
    with pytest.raises(InvalidInput, match="cache_bytes"):
        WindowReader(StoreLocation("unused.zarr"), cache_bytes=-1)


def test_phasenet_trains_to_the_same_losses_from_the_store(training_dir, training_store):
    """The training tutorial's loop (random-init PhaseNet on CPU, Adam, its loss), 3 steps of 4
    windows of 1001 samples, on the original dataset and on the store: the same losses, bit for
    bit."""
    options = {"steps": 3, "seed": 3, "batch_size": 4, "window_samples": 1001}
    want = train_steps(original(training_dir).train(), **options)
    got = train_steps(seisbench_dataset(training_store).train(), **options)
    assert len(got) == 3 and np.all(np.isfinite(got)) and len(set(got)) == 3
    assert got == want


def readme_training_code() -> str:
    """The README's "Train a SeisBench model from a store" block, as written."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Train a SeisBench model from a store", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_training_example_trains_phasenet_from_a_store_on_s3(
    s3_training_store, s3_server
):
    """The README's ten lines, run as written in a fresh interpreter, on the store on S3 (its
    URL and endpoint put in): PhaseNet trains (2 DataLoader workers) to a finite loss."""
    code = readme_training_code()
    assert len(code.strip().splitlines()) <= 10
    code = code.replace("s3://bucket/stead.zarr", s3_training_store)
    code = code.replace("http://127.0.0.1:8333", s3_server.endpoint_url)
    environ = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": s3_server.storage_options["key"],
        "AWS_SECRET_ACCESS_KEY": s3_server.storage_options["secret"],
    }
    run = subprocess.run(
        [sys.executable, "-c", code + "print(float(loss))\n"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert np.isfinite(float(run.stdout.split()[-1]))
