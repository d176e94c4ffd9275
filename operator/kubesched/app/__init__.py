"""Assembling the scheduler process: settings, Kopf wiring, start-up sync, shutdown."""
