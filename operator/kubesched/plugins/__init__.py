"""One folder per plugin (filter, score, reasons, arguments and declared traits), and the registry of
their legacy Policy names. Pure: imports only `model`."""
