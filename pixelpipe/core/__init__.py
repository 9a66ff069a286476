"""Infrastructure every layer uses: atomic file I/O and checksums, formatting, logs, measurement (StageMeter,
timers, the profiler), device probing and the DDP process group. Imports nothing else from pixelpipe.
"""
