"""Fleet admission with Kueue's API: quota decides when a workload may be placed."""
