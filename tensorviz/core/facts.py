"""Typed records of what one kind of source knew: GGUF, ONNX, remote reads, packed (quantized)
weights and training state. Fields of :class:`~tensorviz.core.records.SourceFacts`.

Sources build these records and hand them to the Layout under their key (``"gguf"``,
``"onnx"``, ``"remote"``, ``"quantization"``, ``"training"``); every layer reads them typed
from ``layout.facts``. ``layout.metadata`` shows each as the plain dict :meth:`as_dict` writes
(the same keys as before these records existed: JSON and older callers read that).

Pure Python; no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

__all__ = [
    "SourceRecord",
    "GgufFacts",
    "OnnxFacts",
    "RemoteFacts",
    "QuantizationFacts",
    "OptimizerMapping",
    "TrainingFacts",
    "plain",
]

_R = TypeVar("_R", bound="SourceRecord")


class SourceRecord:
    """A source's facts as a frozen record; :meth:`as_dict` is its ``layout.metadata`` form.

    A field that is None is absent from that form; ``KEYS`` renames a field where the dict's
    key is not a Python name (``"external files"``).
    """

    KEYS: ClassVar[Mapping[str, str]] = {}

    def as_dict(self) -> dict[str, Any]:
        """The plain dict ``layout.metadata`` shows (None fields left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, f.name)
            if value is not None:
                out[self.KEYS.get(f.name, f.name)] = plain(value)
        return out

    @classmethod
    def of(cls: type[_R], value: object) -> _R:
        """``value`` itself when it is one, else the record of its dict form (:meth:`as_dict`)."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"{cls.__name__} facts must be a {cls.__name__} or a mapping, got {type(value).__name__}")
        names = {cls.KEYS.get(f.name, f.name): f for f in fields(cls)}  # type: ignore[arg-type]
        known = {names[k]: v for k, v in value.items() if k in names}
        # a sequence field (default ()) holds a tuple; its dict form, a list (JSON)
        return cls(**{f.name: tuple(v) if f.default == () and isinstance(v, list) else v for f, v in known.items()})

    def merged(self: _R, later: _R) -> _R:
        """This record with the fields ``later`` has (not None) taken from it: what two parts
        of one source know together (as a dict's ``update``)."""
        return replace(self, **{f.name: v for f in fields(later) if (v := getattr(later, f.name)) is not None})  # type: ignore[arg-type, type-var]


def plain(value: Any) -> Any:
    """``value`` with every record inside written as its dict (:meth:`SourceRecord.as_dict`)."""
    if isinstance(value, SourceRecord):
        return value.as_dict()
    if isinstance(value, dict) and any(isinstance(v, SourceRecord) for v in value.values()):
        return {k: plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class GgufFacts(SourceRecord):
    """What a GGUF file's metadata says (``metadata["gguf"]``): the architecture, context
    length, tokenizer and its size (not the vocabulary), the file type, the GGUF version, the
    data alignment and how many metadata keys it holds. None where the file does not say."""

    architecture: str | None = None
    name: int | float | str | None = None
    context_length: int | float | str | None = None
    embedding_length: int | float | str | None = None
    block_count: int | float | str | None = None
    tokenizer: int | float | str | None = None
    file_type: int | float | str | None = None
    vocabulary: int | None = None
    version: int | None = None
    alignment: int | None = None
    keys: int | None = None


@dataclass(frozen=True)
class OnnxFacts(SourceRecord):
    """An ONNX model's initializers (``metadata["onnx"]``): how many, and the external data
    files beside the model that hold them."""

    KEYS: ClassVar[Mapping[str, str]] = {"external_files": "external files"}

    initializers: int = 0
    external_files: Sequence[str] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"initializers": self.initializers, "external files": list(self.external_files)}


@dataclass(frozen=True)
class RemoteFacts(SourceRecord):
    """Where a remote source was read and what reading its headers cost (``metadata["remote"]``)."""

    url: str = ""
    revision: str | None = None
    files: Sequence[str] = ()
    requests: int = 0
    bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        d = {"url": self.url, "revision": self.revision, "files": list(self.files)}
        return {**d, "requests": self.requests, "bytes": self.bytes}


@dataclass(frozen=True)
class QuantizationFacts(SourceRecord):
    """Packed (quantized) weights found in files (``metadata["quantization"]``): their formats,
    how many logical weights, where the facts came from (``config.json quantization_config``
    or tensor names and shapes) and the config's keys that describe the packing."""

    KEYS: ClassVar[Mapping[str, str]] = {"source": "from"}

    formats: Sequence[str] = ()
    weights: int = 0
    source: str = ""
    bits: Any = None
    group_size: Any = None
    weight_block_size: Any = None
    desc_act: Any = None
    sym: Any = None
    version: Any = None
    fmt: Any = None

    #: the quantization_config keys kept, in the order they are written
    CONFIG_KEYS: ClassVar[tuple[str, ...]] = (
        "bits",
        "group_size",
        "weight_block_size",
        "desc_act",
        "sym",
        "version",
        "fmt",
    )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"formats": list(self.formats), "weights": self.weights, "from": self.source}
        out.update({k: getattr(self, k) for k in self.CONFIG_KEYS if getattr(self, k) is not None})
        return out


@dataclass(frozen=True)
class OptimizerMapping(SourceRecord):
    """How one saved optimizer's state was named after parameters: ``mapped_by``
    (``"param_names"``, ``"model order"``, ``"fqn"``, ``"folder names"``; "" when it was not),
    ``why_not`` when it was not, and ``model``, the model key used ("" for none)."""

    mapped_by: str = ""
    why_not: str = ""
    model: str = ""


@dataclass(frozen=True)
class TrainingFacts(SourceRecord):
    """Optimizer state and gradients (``metadata["training"]``).

    A live model's: ``optimizer`` (class name, "" for gradients only), ``wrapper`` (e.g.
    ``"ZeroRedundancyOptimizer"``, or "") and ``notes``. A checkpoint's: ``optimizers``, per
    optimizer prefix its :class:`OptimizerMapping`, and ``notes``. None where a source does
    not say.
    """

    optimizer: str | None = None
    wrapper: str | None = None
    notes: tuple[str, ...] | None = None
    optimizers: Mapping[str, OptimizerMapping] | None = None

    @classmethod
    def of(cls, value: object) -> TrainingFacts:
        facts = super().of(value)
        if facts.optimizers is not None and any(not isinstance(m, OptimizerMapping) for m in facts.optimizers.values()):
            facts = replace(facts, optimizers={k: OptimizerMapping.of(m) for k, m in facts.optimizers.items()})
        return facts

    @property
    def live(self) -> bool:
        """True for a live model's facts (an optimizer object was given, or gradients only)."""
        return self.optimizer is not None
