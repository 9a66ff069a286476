"""The config schema (schema.yaml) and the hardware profiles (profiles.yaml): the only places defaults live; their
resolution and validation, the settings dataclasses built from its sections, and the workflow's stage list. Imports
only pixelpipe.core.
"""
