"""Infrastructure every layer uses: atomic file I/O and checksums, formatting, logs, measurement (StageMeter,
timers, the profiler), device probing, the DDP process group and the commands' one-line errors (cli). Imports
nothing else from pixelpipe.
"""
