"""ONNX export, int8 quantization, the ONNX model format and the CPU deploy benchmark. Imports the layers above.
"""
