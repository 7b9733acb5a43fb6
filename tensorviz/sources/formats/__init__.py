"""File formats: one reader module per format, and the table that picks one by a file's first bytes.

``table.py`` holds :data:`~tensorviz.sources.formats.table.FORMATS`; each reader turns one file
into a :class:`~tensorviz.sources.parts.Part`: ``safetensors.py`` (with ``st_rules.py`` and
``st_serde.py``, safetensors' own parsing rules), ``gguf.py`` (+ ``gguf_types.py``),
``numpy_files.py`` (``.npy``/``.npz``), ``onnx_files.py``, ``checkpoint.py`` (torch zip and
legacy checkpoints, with ``pickle_scan.py`` and ``ckpt_walk.py``) and ``dcp.py``
(``torch.distributed.checkpoint`` folders); ``bounded.py`` checks every length a header claims.
Header-only readers (all but ``checkpoint.py`` and ``ckpt_walk.py``) never import torch.
"""
