"""The savers the save check replays: one rule per saver and each library's replay.

``rules`` is the table (one :class:`~tensorviz.savecheck.savers.rules.LibraryRule` per saver);
``common`` the machinery every replay shares (the dry run's record, library versions, safetensors'
own checks); ``torch_save``, ``hf`` (transformers and accelerate) and ``peft_adapter`` replay
their library's save on data-free stand-ins, never touching the library's globals.
"""
