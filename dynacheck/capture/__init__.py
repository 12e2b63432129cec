"""The built-in GLM-5-NVFP4 short capture: a few GLM-5 layers with NVFP4 linears, compiled and
captured the way SGLang's piecewise CUDA-graph runner does it, to show Dynamo's breaks in a minute."""
