"""Tiny, locally built models that run through the real library code paths.

BGE-M3's weights cannot be downloaded here, but FlagEmbedding's BGEM3FlagModel
loads any directory holding an HF encoder, a tokenizer, sparse_linear.pt and
colbert_linear.pt. ``build_tiny_bgem3`` writes such a directory with random
weights (XLM-RoBERTa shape, hidden size 32) in about a second.
"""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "The nightly hotel cap for tier one cities is five hundred yuan.",
    "Technicians complete the lockout tagout checklist before opening a cabinet.",
    "Critical spares ship the same day when ordered before two in the afternoon.",
    "Fleet availability reached ninety seven percent in the third quarter.",
    "表格 中的 数据 用于 检索 测试",
]


def build_tiny_bgem3(target: Path, seed: int = 0, hidden: int = 32) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    target.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    )
    tok.train_from_iterator(SENTENCES * 4, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        cls_token="<s>",
        sep_token="</s>",
        mask_token="<mask>",
        model_max_length=128,
    )
    fast.save_pretrained(target)
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=fast.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
    )
    XLMRobertaModel(config).save_pretrained(target)
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), target / "sparse_linear.pt")
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), target / "colbert_linear.pt")
    return target
