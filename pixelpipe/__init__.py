"""pixelpipe: render text to pixels, distil a recursive vision encoder, ship it as ONNX."""

__version__ = "0.1.0"
