"""What a SeaweedFS S3 server served, from its own Prometheus metrics: an independent count of
what a command read from a bucket (`weed server -metricsPort`)."""

from __future__ import annotations

import re
import urllib.request

from servers import LOOPBACK, free_port

# The S3 gateway's counts per bucket (SeaweedFS 4): response body bytes sent, and requests (by
# type, `GET`, `HEAD`, …, and status code).
SENT_BYTES = "SeaweedFS_s3_bucket_traffic_sent_bytes_total"
REQUESTS = "SeaweedFS_s3_request_total"
_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def metrics_options() -> tuple[list[str], int]:
    """`weed server` options that serve its metrics on a free loopback port: (options, port)."""
    port = free_port()
    return [f"-metricsPort={port}", f"-metricsIp={LOOPBACK}"], port


def counter(port: int, name: str, **labels: str) -> float:
    """The sum of counter `name` over its samples with `labels`, from the metrics on `port`
    (0 before the server counted any)."""
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return sum(
        float(value)
        for metric, found, value in _SAMPLE.findall(text)
        if metric == name and labels.items() <= dict(_LABEL.findall(found)).items()
    )


def bucket_sent_bytes(port: int, bucket: str) -> int:
    """The bytes the S3 gateway has sent from `bucket` since it started."""
    return int(counter(port, SENT_BYTES, bucket=bucket))


def bucket_requests(port: int, bucket: str, kind: str = "GET") -> int:
    """The requests of type `kind` the S3 gateway has answered for `bucket`, any status."""
    return int(counter(port, REQUESTS, bucket=bucket, type=kind))
