"""The recursive vision encoder (TRMVisionEncoder) and its safetensors checkpoints. Imports core, config, data.
"""
