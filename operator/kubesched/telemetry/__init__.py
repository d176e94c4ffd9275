"""Metrics, structured logs, the event-loop lag monitor and the HTTP endpoints they are served on.
Imports nothing of ours."""
