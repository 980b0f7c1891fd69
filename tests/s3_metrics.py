"""Bytes a SeaweedFS S3 server sent, from its own Prometheus metrics: an independent count of
what a command read from a bucket (`weed server -metricsPort`)."""

from __future__ import annotations

import re
import urllib.request

from servers import LOOPBACK, free_port

# The S3 gateway's count of response body bytes per bucket (SeaweedFS 4).
SENT_BYTES = "SeaweedFS_s3_bucket_traffic_sent_bytes_total"


def metrics_options() -> tuple[list[str], int]:
    """`weed server` options that serve its metrics on a free loopback port: (options, port)."""
    port = free_port()
    return [f"-metricsPort={port}", f"-metricsIp={LOOPBACK}"], port


def bucket_sent_bytes(port: int, bucket: str) -> int:
    """The bytes the S3 gateway has sent from `bucket` (object bodies, listings) since it
    started, read from its metrics on `port` (0 before the first request)."""
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    pattern = rf'^{SENT_BYTES}\{{bucket="{re.escape(bucket)}"\}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0
