"""Deciding on a snapshot: filter, score and select; preemption; a batch of pods decided one after
another; the extenders' configuration and wire format. Pure: imports only `plugins` and `model`."""
