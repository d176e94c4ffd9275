"""The scheduling loop and its state: queue, cache, nominator, assume and bind dispatch. Imports
`kube`, `algorithm`, `model`, `telemetry`."""
