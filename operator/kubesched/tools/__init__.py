"""What users run besides the scheduler: `explain`, `simulate`, snapshot files. Imports the layers
below."""
