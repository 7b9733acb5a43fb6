"""The load-check layer: what a loader (``load_state_dict``, ``safetensors.torch.load_model``)
would do with a model and a source, before it runs.

Each loader's own code runs on data-free twins: a meta-device copy of the model (its tensors
replaced by meta tensors of the same shape, dtype and strides; ties kept) and meta tensors for
the source (from the source's layout: files are read header-only). Nothing of the user's model,
source or the libraries' globals is changed. Sits beside the save check: may import the core,
the sources and the renderers.
"""
