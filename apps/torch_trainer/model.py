"""A small decoder-only transformer (GPT) in plain PyTorch for the example trainer.

Pre-LayerNorm blocks with causal self-attention, learned positions, an untied head.
Deterministic on CPU with one thread: no dropout, no randomness after the seeded init.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, d_model, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, ff)
        self.fc2 = nn.Linear(ff, d_model)

    def forward(self, x, causal):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))  # [b, h, s, dh]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab_size, seq_length, d_model=128, layers=2, heads=4, ff=512):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model)
        self.positions = nn.Embedding(seq_length, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, ff) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, position_ids):
        """tokens, position_ids: int64 [b, s] -> logits [b, s, vocab]."""
        s = tokens.shape[1]
        causal = torch.ones(s, s, dtype=torch.bool).triu(1)  # query i sees keys 0..i
        x = self.tokens(tokens) + self.positions(position_ids)
        for block in self.blocks:
            x = block(x, causal)
        return self.head(self.norm(x))


def masked_loss(logits, labels, loss_mask):
    """Mean cross entropy over the tokens whose loss_mask is 1 (Megatron's loss)."""
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                reduction="none")
    mask = loss_mask.reshape(-1)
    return (per_token * mask).sum() / mask.sum().clamp_min(1.0)
