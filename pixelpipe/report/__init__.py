"""Reports of a run: prediction against measurement, the closing summary, and the optimization matrix.
Imports every layer above; nothing imports it but the workflow adapters.
"""
