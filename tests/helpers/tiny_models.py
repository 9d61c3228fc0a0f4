"""Tiny, locally built models that run through the real library code paths.

BGE-M3's weights cannot be downloaded here, but FlagEmbedding's BGEM3FlagModel
loads any directory holding an HF encoder, a tokenizer, sparse_linear.pt and
colbert_linear.pt. ``build_tiny_bgem3`` writes such a directory with random
weights (XLM-RoBERTa shape, hidden size 32) in about a second; its keyword
arguments size it up, and ``build_random_bgem3`` uses them to build a model of
BGE-M3's exact architecture (XLM-RoBERTa large, 568M parameters, ~2.3 GB in
float32) for throughput benchmarks.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SENTENCES = [
    "The nightly hotel cap for tier one cities is five hundred yuan.",
    "Technicians complete the lockout tagout checklist before opening a cabinet.",
    "Critical spares ship the same day when ordered before two in the afternoon.",
    "Fleet availability reached ninety seven percent in the third quarter.",
    "表格 中的 数据 用于 检索 测试",
]
# Chinese, Japanese and Korean, as in samples/bilingual and the Korean docling PDF: the
# tiny model's vocabulary holds every character of these (WordPiece's initial alphabet),
# so CJK text reaches BGE-M3's code path as real tokens, not <unk>, as it does with
# BGE-M3's own XLM-R tokenizer.
CJK_SENTENCES = [
    "固定变更窗口为每周四凌晨一点至五点。窗口之外的普通变更一律顺延到下一个窗口。",
    "节假日前一天不安排任何变更。紧急变更须由值班经理电话批准，并在二十四小时内补录变更单。",
    "涉及核心数据库的紧急变更还需要数据库负责人在场。普通变更至少提前三个工作日提交变更单。",
    "由变更评审委员会在每周二的例会上审批。变更单必须写明回滚方案和影响范围。",
    "变更后三十分钟内监控指标异常的，执行人必须立即回滚，不得尝试现场修复。",
    "回滚完成后由执行人撰写事故复盘报告。变更开始前一小时，通过运维群和邮件通知受影响的业务方。",
    "运维变更管理规范 紧急变更 审批流程 回滚 通知 差旅报销细则 报销时限 交通 住宿标准 餐补",
    "出差结束后十五个自然日内提交报销单，逾期不予报销。高铁二等座为默认标准。",
    "单程超过六小时可乘坐飞机经济舱。出租车费用需附行程单。每晚住宿费用按城市分级报销。",
    "城市 每晚上限 币种 北京、上海 其他省会城市 其他城市 人民币。每天餐补一百元，按出差天数发放，无需发票。",
    "鹿特丹仓库手册 开放时间 仓库工作日早上七点到晚上七点开放。周末提货须提前一天向值班文员预约。",
    "叉车证 只有持有有效叉车证的员工才能在C通道驾驶叉车。叉车证每三年在代尔夫特培训中心更新一次。",
    "危险品 锂电池存放在4号门旁边的防火笼内，每周一由安全员检查。",
    "東京からの出荷は毎週月曜日に倉庫で検品されます。破損した箱は写真を撮ってから返送してください。",
    "코로나-19 국내 확진자는 9,661명, 사망자는 158명으로 나타났다. 변경 창은 매주 목요일 새벽입니다.",
]

# BAAI/bge-m3's config.json, less what does not change the computation.
BGE_M3_ARCHITECTURE: dict[str, Any] = {
    "hidden": 1024,
    "layers": 24,
    "heads": 16,
    "intermediate": 4096,
    "max_positions": 8194,
    "vocab_size": 250002,
    "type_vocab_size": 1,
    "layer_norm_eps": 1e-5,
}


def build_tiny_bgem3(
    target: Path,
    seed: int = 0,
    hidden: int = 32,
    *,
    layers: int = 2,
    heads: int = 2,
    intermediate: int = 64,
    max_positions: int = 130,
    vocab_size: int | None = None,
    type_vocab_size: int | None = None,
    layer_norm_eps: float | None = None,
    tokenizer_vocab: int = 900,
    corpus: Sequence[str] | None = None,
) -> Path:
    """A BGE-M3-layout directory with random weights; the defaults build the tiny test model.

    ``vocab_size`` (default: the tokenizer's) may exceed the WordPiece tokenizer's
    vocabulary, as BGE-M3's 250002 does: the extra embedding rows are never looked
    up but cost what they cost in memory. The tokenizer's ``model_max_length`` is
    ``max_positions - 2``, as in XLM-RoBERTa.
    """
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

    target.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    texts = list(corpus) if corpus is not None else (SENTENCES + CJK_SENTENCES) * 4
    # Every printable ASCII character and every CJK character above is a token of its own.
    alphabet = sorted({ch for t in CJK_SENTENCES for ch in t} | set(string.printable))
    alphabet = [ch for ch in alphabet if not ch.isspace()]
    trainer = trainers.WordPieceTrainer(
        vocab_size=tokenizer_vocab,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=alphabet,
    )
    tok.train_from_iterator(texts, trainer=trainer)
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
        model_max_length=max_positions - 2,
    )
    fast.save_pretrained(target)
    torch.manual_seed(seed)
    extra: dict[str, Any] = {}
    if type_vocab_size is not None:
        extra["type_vocab_size"] = type_vocab_size
    if layer_norm_eps is not None:
        extra["layer_norm_eps"] = layer_norm_eps
    config = XLMRobertaConfig(
        vocab_size=vocab_size if vocab_size is not None else fast.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        max_position_embeddings=max_positions,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        **extra,
    )
    model = XLMRobertaModel(config)
    model.save_pretrained(target)
    del model
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), target / "sparse_linear.pt")
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), target / "colbert_linear.pt")
    return target


def build_random_bgem3(target: Path, seed: int = 0, corpus: Sequence[str] | None = None) -> Path:
    """Randomly initialised weights of BGE-M3's exact architecture, in its directory layout."""
    arch = dict(BGE_M3_ARCHITECTURE)
    hidden = int(arch.pop("hidden"))
    return build_tiny_bgem3(target, seed, hidden, corpus=corpus, **arch)


def retrained_copy(source: Path, target: Path, seed: int) -> Path:
    """The same model directory (same tokenizer, same shape) with other random weights:
    an embedding-model upgrade that leaves chunk boundaries unchanged."""
    import shutil

    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    shutil.copytree(source, target)
    torch.manual_seed(seed)
    config = XLMRobertaConfig.from_pretrained(source)
    XLMRobertaModel(config).save_pretrained(target)
    hidden = config.hidden_size
    torch.save(torch.nn.Linear(hidden, 1).state_dict(), target / "sparse_linear.pt")
    torch.save(torch.nn.Linear(hidden, hidden).state_dict(), target / "colbert_linear.pt")
    return target
