"""An empty program: what each tool costs to start and stop, nothing else."""
