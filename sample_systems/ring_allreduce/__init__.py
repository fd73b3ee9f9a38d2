"""Ring all-reduce: data-parallel training, multiprocessing spawn, TCP between neighbours."""
