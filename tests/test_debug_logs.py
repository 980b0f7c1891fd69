"""distributed's debugging record of recent messages is off in seisctf's processes: a client
keeps no graph it sent, a scheduler no batch of tasks it sent a worker (`drop_debug_logs`)."""

from __future__ import annotations

import sys

import cloudpickle
import dask
import pytest
from servers import start_dask_cluster, stop_dask_cluster

from seisctf.cluster import compute_in_waves, dask_client
from seisctf.process_memory import drop_debug_logs

PAYLOAD_BYTES = 200_000  # a graph's bytes: under the 1 MB above which distributed keeps no copy
WAVES = 5
# The probes run on the scheduler and workers, which cannot import this module: sent by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _graph_task(index: int):
    """A task whose graph carries PAYLOAD_BYTES (the bytes travel with the graph)."""
    return dask.delayed(len)(bytes([index]) * PAYLOAD_BYTES)


def _kept_bytes(log) -> int:
    """Bytes of the messages a BatchedSend's record holds (a message: a list of dicts)."""
    from distributed.protocol.serialize import Serialized

    total = 0
    for payload in log:
        for message in payload if isinstance(payload, list) else []:
            for value in message.values() if isinstance(message, dict) else []:
                if isinstance(value, Serialized):
                    total += sum(len(frame) for frame in value.frames)
    return total


def _stream_records(dask_scheduler) -> list[int]:
    """On the scheduler: the messages each of its streams (to workers and clients) keeps."""
    return [len(stream.recent_message_log) for stream in dask_scheduler.stream_comms.values()]


def _worker_record(dask_worker) -> int:
    return len(dask_worker.batched_stream.recent_message_log)


def _waves_of_graphs() -> list[int]:
    return compute_in_waves(_graph_task, WAVES, quiet=True, wave_tasks=1)


def test_the_embedded_clusters_processes_keep_no_record_of_messages():
    with dask_client(n_workers=1, quiet=True) as client:
        assert _waves_of_graphs() == [PAYLOAD_BYTES] * WAVES
        assert client.scheduler_comm.recent_message_log.maxlen == 0
        assert _kept_bytes(client.scheduler_comm.recent_message_log) == 0
        assert client.run_on_scheduler(_stream_records) and not any(
            client.run_on_scheduler(_stream_records)
        )
        assert set(client.run(_worker_record).values()) == {0}


@pytest.mark.timeout(180)
def test_a_scheduler_started_with_the_preload_keeps_no_record_of_the_tasks_it_sent():
    """A `dask scheduler --preload seisctf.cluster` and the command's client: neither keeps the
    graphs; without the preload the scheduler's stream to its worker keeps its batches (the
    record this turns off)."""
    preloaded = start_dask_cluster(n_workers=1, scheduler_options=["--preload", "seisctf.cluster"])
    plain = start_dask_cluster(n_workers=1)
    try:
        with dask_client(scheduler=preloaded.address, quiet=True) as client:
            assert _waves_of_graphs() == [PAYLOAD_BYTES] * WAVES
            assert _kept_bytes(client.scheduler_comm.recent_message_log) == 0
            assert not any(client.run_on_scheduler(_stream_records))
        with dask_client(scheduler=plain.address, quiet=True) as client:
            _waves_of_graphs()
            assert sum(client.run_on_scheduler(_stream_records)) >= WAVES
    finally:
        stop_dask_cluster(preloaded)
        stop_dask_cluster(plain)


def test_a_users_dask_config_wins():
    with dask.config.set({"distributed.admin.low-level-log-length": 7}):
        drop_debug_logs()
        assert dask.config.get("distributed.admin.low-level-log-length") == 7
