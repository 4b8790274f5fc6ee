"""The PyTorch models that the importer's tests export (issue 17).

Each module's forward takes the batch and returns the loss, as
`torch.onnx.export(..., training=TrainingMode.TRAINING)` needs. `MODELS`
maps a name to (constructor, batch maker); batches are deterministic.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    """Linear, ReLU, GELU (erf), Linear, cross-entropy."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)

    def forward(self, x, y):
        h = F.gelu(self.fc2(torch.relu(self.fc1(x))))
        return F.cross_entropy(self.head(h), y)


class Cnn(nn.Module):
    """Conv, batch norm, ReLU, max pool, conv, batch norm, global average
    pool, flatten, linear, cross-entropy."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, y):
        h = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        h = torch.relu(self.bn2(self.conv2(h)))
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(self.fc(h), y)


class GptBlock(nn.Module):
    """Token and position embeddings, one pre-norm transformer block with
    hand-written causal attention and a tanh-GELU MLP, final layer norm,
    language-model head, cross-entropy over every position."""

    def __init__(self, vocab=64, seq=16, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq)))

    def forward(self, tokens, targets):
        b, t = tokens.shape
        positions = torch.arange(t)
        x = self.wte(tokens) + self.wpe(positions)
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        d = x.shape[-1] // self.heads
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.heads, d).transpose(1, 2)
        v = v.view(b, t, self.heads, d).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(self.causal[:t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, -1)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class RmsNorm(nn.Module):
    """Llama's RMSNorm, written out (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaMlp(nn.Module):
    """RMSNorm, SiLU-gated MLP, residual, mean squared error."""

    def __init__(self, dim=16, hidden=48):
        super().__init__()
        self.norm = RmsNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, y):
        h = self.norm(x)
        out = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        # torch 1.13 cannot export F.mse_loss; this is the same mean.
        return ((out - y) ** 2).mean()


class EncoderLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer (post-norm, ReLU, no dropout) as
    nn.MultiheadAttention exports it: one packed projection split by Slice
    nodes whose ends ONNX shape inference cannot know (they come from Shape
    arithmetic), mean squared error."""

    def __init__(self, dim=32, heads=4, hidden=64):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(dim, heads, hidden, dropout=0.0,
                                                batch_first=True)

    def forward(self, x, y):
        return ((self.layer(x) - y) ** 2).mean()


def _classes(shape, classes, seed):
    return torch.randint(0, classes, shape, generator=torch.Generator().manual_seed(seed))


def _normal(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


MODELS = {
    "mlp": (Mlp, lambda seed: (_normal((8, 16), seed), _classes((8,), 10, seed + 1))),
    "cnn": (Cnn, lambda seed: (_normal((4, 3, 16, 16), seed), _classes((4,), 10, seed + 1))),
    "gpt_block": (GptBlock, lambda seed: (_classes((2, 16), 64, seed), _classes((2, 16), 64, seed + 1))),
    "llama_mlp": (LlamaMlp, lambda seed: (_normal((8, 16), seed), _normal((8, 16), seed + 1))),
    "encoder_layer": (EncoderLayer, lambda seed: (_normal((2, 8, 32), seed), _normal((2, 8, 32), seed + 1))),
}
