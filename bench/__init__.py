"""Side-by-side benchmarks: mokkafs against the same tree on tmpfs (what a rendered mock
serves from) and real sysfs, measured interleaved in one run. Prints markdown tables, ratios
first; writes results JSON and PNG plots to bench/results/. Timings are figures to read, not
assertions: nothing here fails on a number.

``python -m bench`` (bench/run): harness.py starts daemons and measures processes,
readers.py runs the C reader, figures/ holds one module per figure, report.py makes the
tables and plots, publish.py writes the full sweep into bench/README.md."""
