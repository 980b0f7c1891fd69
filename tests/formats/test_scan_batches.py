"""The scan's batches, the plan's partitions: their number follows the cluster, not the archive,
so what the client holds per partition (handles, summaries) does not grow with the files."""

import math

import pytest

from seisctf.cluster import cluster_workers, dask_client
from seisctf.formats.shared import resumable


def batches(files: int, workers: int) -> int:
    return math.ceil(files / resumable.batch_size(files, workers))


@pytest.mark.parametrize("files", [10**4, 10**5, 10**6, 10**7])
def test_two_workers_scan_any_archive_in_the_same_number_of_batches(files):
    assert batches(files, 2) == resumable.SCAN_TASKS == 16


@pytest.mark.parametrize("workers", [1, 3, 50, 1000])
def test_a_larger_cluster_gets_more_batches_of_fewer_files(workers):
    files = 10**7
    expected = max(resumable.SCAN_TASKS, resumable.SCAN_TASKS_PER_WORKER * workers)
    assert batches(files, workers) == expected
    assert resumable.batch_size(files, workers) == math.ceil(files / expected)


def test_fewer_files_than_batches_scan_a_file_a_task():
    assert resumable.batch_size(5, 2) == 1 and batches(5, 2) == 5
    assert resumable.batch_size(0, 2) == 1


def test_the_batches_follow_the_clusters_workers(dask_cluster, dask_cluster_one_worker):
    assert cluster_workers() == 1  # no client: the local scheduler
    with dask_client(scheduler=dask_cluster.address, quiet=True):
        assert cluster_workers() == 2
        assert resumable.batch_size(10**5) == resumable.batch_size(10**5, 2) == 6250
    with dask_client(scheduler=dask_cluster_one_worker.address, quiet=True):
        assert cluster_workers() == 1
        assert resumable.batch_size(10**5) == 6250  # SCAN_TASKS at least
