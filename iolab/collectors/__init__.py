"""Collectors: one module per sampler that runs beside a benchmark (``/proc/stat``, cpufreq,
the process tree, interrupts, DCGM, NVML, stress-ng as a disturbance...) and how its output is
read into a run's row.

Responsible for: what is sampled around a run and how. Not responsible for: the benchmark tools
themselves (``iolab.tools``; bdevperf's output marker stays with its adapter there) or when
a collector is started (``iolab.execution.one_run``).
"""
