"""The distributed readers: layouts of sharded models across the ranks of a torch.distributed job.

``collective`` is ``tv.analyze(obj, group=...)``: each rank describes its DTensors and FSDP2
units, the ranks exchange the descriptions, and every rank builds the same global layout
(``global_layout``), each local shard placed exactly from its placements (``placements``).
``fsdp_units`` reads FSDP2's sharded and all-gathered storages from torch; ``fsdp_facts`` builds
and reads FSDP2's record in ``layout.facts.fsdp`` (pure, torch-free). May import the core.
"""
