"""Kubernetes I/O: the API client, listings and watches, binding, events, eviction, volume writes,
leader election and the extenders HTTP transport. Imports `algorithm`, `model`, `telemetry`."""
