"""Assembling the scheduler process: settings, watches and start-up sync, Kopf wiring, lifecycle."""
