"""servebook's own models: the random-weight GGUF files and Hugging Face checkpoints it writes (tiny, random, custom
shapes, a reasoning-shaped checkpoint) and the real weights it assembles from the registry, all in its cache.

Above the engine adapters: the GGUF writer reads the vocabulary and chat template of the llama.cpp build
(engines.llamacpp_build), and which format a model takes is the adapter's fact (engines.ModelFormat).
"""
