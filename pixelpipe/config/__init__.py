"""The config schema (schema.yaml: the only place defaults live), its resolution and validation, the settings
dataclasses built from its sections, and the workflow's stage list. Imports only pixelpipe.core.
"""
