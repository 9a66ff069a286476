"""Text to pixels and back to arrays: the corpus and its splits, fonts and the glyph atlas, rendering into cache
shards, random windows, augmentation, and the consolidated encoded dataset. Imports core and config.
"""
