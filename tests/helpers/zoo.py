"""A model zoo for the save check: tiny transformers architectures built from their configs, and
a few timm/torchvision-style modules, and diffusers models built from their configs (diffusers
installs on the pinned torch; timm does not run there: it imports torchvision, whose 0.28.0 wheel
fails to load beside torch 2.13.0's CPU build, 'operator torchvision::nms does not exist'). Nothing downloads; every model is a few KiB.

Configs are generated from the installed transformers: each config class gets the shrinking
keywords its ``__init__`` accepts (``hidden_size``, ``d_model``, ``n_layer``...), plus the few
keywords an architecture needs to stay consistent.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

#: Keywords that shrink a config, applied where the config's __init__ takes them.
SHRINK: dict[str, Any] = {
    "vocab_size": 96,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 64,
    "d_model": 16,
    "d_ff": 32,
    "d_kv": 8,
    "num_layers": 1,
    "num_decoder_layers": 1,
    "num_heads": 2,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
    "n_embd": 16,
    "n_layer": 1,
    "n_head": 2,
    "n_positions": 64,
    "n_inner": 32,
    "embedding_size": 16,
    "image_size": 8,
    "patch_size": 4,
    "num_channels": 3,
    "num_labels": 3,
    "num_mel_bins": 8,
    "max_source_positions": 16,
    "max_target_positions": 16,
}

#: name -> (config class, model class, extra config keywords). Kinds in the comments.
ARCHITECTURES: dict[str, tuple[str, str, dict[str, Any]]] = {
    # decoder-only, tied and untied
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {}),
    "gpt2_untied": ("GPT2Config", "GPT2LMHeadModel", {"tie_word_embeddings": False}),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "llama_tied": ("LlamaConfig", "LlamaForCausalLM", {"tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "phi": ("PhiConfig", "PhiForCausalLM", {}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 8}),
    "opt": ("OPTConfig", "OPTForCausalLM", {"ffn_dim": 32, "word_embed_proj_dim": 16}),
    "bloom": ("BloomConfig", "BloomForCausalLM", {}),
    "falcon": ("FalconConfig", "FalconForCausalLM", {}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", {"rotary_dim": 4}),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", {}),
    # mixture of experts
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {"num_local_experts": 2, "num_experts_per_tok": 1}),
    "qwen2_moe": (
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8},
    ),
    # encoders
    "bert": ("BertConfig", "BertForMaskedLM", {}),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", {}),
    "distilbert": (
        "DistilBertConfig",
        "DistilBertForMaskedLM",
        {"dim": 16, "hidden_dim": 32, "n_layers": 1, "n_heads": 2},
    ),
    "albert": ("AlbertConfig", "AlbertForMaskedLM", {}),
    "electra": ("ElectraConfig", "ElectraForMaskedLM", {}),
    # encoder-decoder
    "t5": ("T5Config", "T5ForConditionalGeneration", {}),
    "bart": ("BartConfig", "BartForConditionalGeneration", {}),
    "marian": ("MarianConfig", "MarianMTModel", {"pad_token_id": 0, "decoder_start_token_id": 0}),
    # vision
    "vit": ("ViTConfig", "ViTForImageClassification", {}),
    "convnext": (
        "ConvNextConfig",
        "ConvNextForImageClassification",
        {"num_stages": 2, "hidden_sizes": [8, 16], "depths": [1, 1]},
    ),
    "resnet": (
        "ResNetConfig",
        "ResNetForImageClassification",
        {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1]},
    ),
    # speech
    "whisper": ("WhisperConfig", "WhisperForConditionalGeneration", {"pad_token_id": 0, "decoder_start_token_id": 1}),
    "wav2vec2": (
        "Wav2Vec2Config",
        "Wav2Vec2ForCTC",
        {
            "conv_dim": (8, 8),
            "conv_stride": (5, 2),
            "conv_kernel": (10, 3),
            "num_conv_pos_embeddings": 4,
            "num_conv_pos_embedding_groups": 2,
        },
    ),
}


def tiny_config(config_class: Any, extra: dict[str, Any]) -> Any:
    """A tiny config: :data:`SHRINK` keywords the class's ``__init__`` accepts, then ``extra``."""
    params = inspect.signature(config_class.__init__).parameters
    kwargs = {k: v for k, v in SHRINK.items() if k in params}
    kwargs.update(extra)
    return config_class(**kwargs)


def transformers_model(name: str, seed: int = 0) -> nn.Module:
    """The architecture ``name`` of :data:`ARCHITECTURES`, built tiny with weights from ``seed``."""
    import transformers

    config_name, model_name, extra = ARCHITECTURES[name]
    with warnings.catch_warnings():  # test-only: tiny configs make transformers chatty
        warnings.simplefilter("ignore")
        config = tiny_config(getattr(transformers, config_name), extra)
        torch.manual_seed(seed)
        model = getattr(transformers, model_name)(config)
    return model.eval()


# -- timm/torchvision-style modules -----------------------------------------------------------------
class ResNetBlock(nn.Module):
    """torchvision's BasicBlock shape: conv-bn-relu twice, a downsampling shortcut; BatchNorm
    buffers (running stats, int64 num_batches_tracked)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.downsample = nn.Sequential(nn.Conv2d(3, 8, 1, stride=2, bias=False), nn.BatchNorm2d(8))
        self.fc = nn.Linear(8, 4)


class TimmViT(nn.Module):
    """timm's VisionTransformer shape: cls_token and pos_embed Parameters, a fused qkv Linear,
    nn.MultiheadAttention's in_proj_weight, a head."""

    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 16, 4, 4)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 16))
        self.pos_embed = nn.Parameter(torch.randn(1, 5, 16) * 0.02)
        self.qkv = nn.Linear(16, 48)
        self.mha = nn.MultiheadAttention(16, 2)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 3)


class WeightNormConv(nn.Module):
    """A weight-normalised conv (parametrizations: original0/original1), as wav2vec2 and
    many vocoders use."""

    def __init__(self):
        super().__init__()
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3))


class SqueezeExcite(nn.Module):
    """A MobileNet-style depthwise conv + squeeze-excite, with a tied classifier weight
    (one Parameter under two names)."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, groups=8)
        self.se_reduce = nn.Conv2d(8, 2, 1)
        self.se_expand = nn.Conv2d(2, 8, 1)
        self.classifier = nn.Linear(8, 8)
        self.aux = nn.Linear(8, 8)
        self.aux.weight = self.classifier.weight


class _Param(nn.Parameter):
    """A trivial Parameter subclass (no __torch_function__ of its own): savers treat it as its base."""


class ParamSubclass(nn.Module):
    """A Linear whose weight is a trivial ``nn.Parameter`` subclass (issue 22, cause 8)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.lin.weight = _Param(torch.randn(3, 4))


class FuncEnsemble(nn.Module):
    """``torch.func.stack_module_state`` of three Linears (one stacked weight and bias, as a
    vmapped ensemble trains them), with each member's weight kept as a row view of the stack."""

    def __init__(self):
        super().__init__()
        params, _ = torch.func.stack_module_state([nn.Linear(4, 4) for _ in range(3)])
        self.weight = nn.Parameter(params["weight"])
        self.bias = nn.Parameter(params["bias"])
        for i in range(3):
            self.register_parameter(f"member{i}", nn.Parameter(self.weight.data[i]))


class ComplexRotary(nn.Module):
    """Complex buffers, as a state-space or rotary model keeps them: a table and its
    conjugate kept as a conjugate view of it (``z.conj()``: the same bytes, the conj bit set),
    and a conjugate view nothing else reads. Savers writing raw bytes (safetensors) write a
    conjugate view's values unconjugated."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        z = torch.complex(torch.randn(8), torch.randn(8))
        self.register_buffer("rot", z)
        self.register_buffer("rot_conj", z.conj())
        self.register_buffer("kernel", torch.complex(torch.randn(6), torch.randn(6)).conj())


@functools.cache
def complex_pretrained() -> type:
    """:class:`ComplexRotary` as a transformers model (a config class and a ``PreTrainedModel``
    of its own), so ``save_pretrained`` and ``from_pretrained`` meet complex buffers and
    conjugate views; ``conj_copy`` keeps the table's conjugate as a view of it (transformers
    then refuses the shared pair), else only the lone conjugate view ``kernel``."""
    from transformers import PretrainedConfig, PreTrainedModel

    class ComplexRotaryConfig(PretrainedConfig):
        model_type = "tensorviz-complex-rotary"

        def __init__(self, conj_copy: bool = True, **kwargs: Any) -> None:
            self.conj_copy = conj_copy
            super().__init__(**kwargs)

    class ComplexRotaryModel(PreTrainedModel):
        config_class = ComplexRotaryConfig
        base_model_prefix = "rotary"

        def __init__(self, config: ComplexRotaryConfig) -> None:
            super().__init__(config)
            self.lin = nn.Linear(4, 4)
            z = torch.complex(torch.randn(8), torch.randn(8))
            self.register_buffer("rot", z)
            if config.conj_copy:
                self.register_buffer("rot_conj", z.conj())
            self.register_buffer("kernel", torch.complex(torch.randn(6), torch.randn(6)).conj())
            self.post_init()

        def _init_weights(self, module: nn.Module) -> None:  # the weights are the zoo's noise (build)
            pass

    return ComplexRotaryModel


def _complex_pretrained(conj_copy: bool) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        cls = complex_pretrained()
        return cls(cls.config_class(conj_copy=conj_copy))

    return make


def compiled_resnet() -> nn.Module:
    """``torch.compile`` of the ResNet block (an OptimizedModule: names under ``_orig_mod.``)."""
    return torch.compile(ResNetBlock())


# -- diffusers, built from configs (its models tie nothing; 25 cells, every one "ok" and real) --
def _diffusers(cls: str, **config: Any) -> Callable[[], nn.Module]:
    def make() -> nn.Module:
        import diffusers

        return getattr(diffusers, cls)(**config)

    make.__name__ = f"diffusers_{cls}"
    return make


_SMALL = {"norm_num_groups": 4, "layers_per_block": 1}
DIFFUSERS: dict[str, Callable[[], nn.Module]] = {
    "diffusers_unet2d": _diffusers(
        "UNet2DModel",
        sample_size=8,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        attention_head_dim=4,
        **_SMALL,
    ),
    "diffusers_unet2d_cond": _diffusers(
        "UNet2DConditionModel",
        sample_size=8,
        block_out_channels=(8, 16),
        cross_attention_dim=8,
        attention_head_dim=2,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        **_SMALL,
    ),
    "diffusers_vae": _diffusers("AutoencoderKL", block_out_channels=(8,), latent_channels=2, **_SMALL),
    "diffusers_vq": _diffusers(
        "VQModel", block_out_channels=(8,), latent_channels=2, num_vq_embeddings=16, vq_embed_dim=2, **_SMALL
    ),
    "diffusers_dit": _diffusers(
        "DiTTransformer2DModel",
        num_attention_heads=2,
        attention_head_dim=4,
        in_channels=4,
        out_channels=4,
        num_layers=1,
        sample_size=4,
        patch_size=2,
        num_embeds_ada_norm=10,
        norm_num_groups=4,
    ),
}

#: transformers models of the zoo's own classes (save_pretrained applies; not an architecture of transformers).
PRETRAINED: dict[str, Callable[[], nn.Module]] = {
    "hf_complex_rotary": _complex_pretrained(conj_copy=True),
    "hf_complex_kernel": _complex_pretrained(conj_copy=False),
}

MODULES: dict[str, Callable[[], nn.Module]] = {
    "tv_resnet_block": ResNetBlock,
    "timm_vit": TimmViT,
    "weight_norm_conv": WeightNormConv,
    "squeeze_excite_tied": SqueezeExcite,
    "param_subclass": ParamSubclass,
    "func_ensemble": FuncEnsemble,
    "complex_rotary": ComplexRotary,
    "compiled_resnet": compiled_resnet,
    **PRETRAINED,
    **DIFFUSERS,
}


def build(name: str, seed: int = 0) -> nn.Module:
    """Any zoo entry by name, weights from ``seed``; then every float tensor is filled with noise
    (in place, so ties and views stay), so no weight equals a fresh initialisation by chance --
    except what the model computes itself (``_keys_to_ignore_on_save``: Marian's sinusoidal
    positions), which a real model never trains either."""
    if name in MODULES:
        torch.manual_seed(seed)
        model = MODULES[name]()
    else:
        model = transformers_model(name, seed)
    gen = torch.Generator().manual_seed(1000 + seed)
    derived = set(getattr(model, "_keys_to_ignore_on_save", None) or ())
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point() and t.numel() and name not in derived:
                t.copy_(torch.rand(t.shape, generator=gen, dtype=torch.float32).to(t.dtype) * 2 - 1)
    return model


ZOO = [*ARCHITECTURES, *MODULES]
