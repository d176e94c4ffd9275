"""Typed, immutable views of pods, nodes and the objects plugins read; quantities, selectors, durations,
the table of watched kinds. Pure: imports nothing of ours."""
