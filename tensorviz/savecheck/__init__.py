"""The save-check layer: what each saver (safetensors, torch.save, transformers, accelerate)
would do with a set of tensors, predicted from metadata and data-free stand-ins.

May import the core, the sources and the renderers; never patches a library global.
"""
