"""Writes the ONNX models of tests/Driver/import-attention.test with
torch.onnx.export (opset 17, training mode): the GPT block of the importer's
tests (attention written by hand), and a model of torch.nn's transformer
layers, whose nn.MultiheadAttention exports its own form.

    export_attention.py DIR
"""

import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "import"))
from models import GptBlock  # noqa: E402


class Layers(nn.Module):
    """An encoder layer (batch first, no mask) and a decoder layer (sequence
    first, causal self-attention, cross-attention to the encoder's)."""

    def __init__(self, dim=32, heads=4, seq=8):
        super().__init__()
        self.encoder = nn.TransformerEncoderLayer(dim, heads, 64, dropout=0.0,
                                                  batch_first=True)
        self.decoder = nn.TransformerDecoderLayer(dim, heads, 64, dropout=0.0)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq)))

    def forward(self, x, y):
        memory = self.encoder(x)
        causal = torch.zeros_like(self.causal).masked_fill(self.causal == 0,
                                                           float("-inf"))
        h = self.decoder(x.transpose(0, 1), memory.transpose(0, 1),
                         tgt_mask=causal)
        return ((h.transpose(0, 1) - y) ** 2).mean()


def export(module, inputs, path):
    torch.onnx.export(module, inputs, path,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17,
                      input_names=["x", "y"], output_names=["loss"])


def main(directory):
    os.makedirs(directory, exist_ok=True)
    torch.manual_seed(0)
    export(GptBlock(), (torch.randint(0, 64, (2, 16)),
                        torch.randint(0, 64, (2, 16))),
           os.path.join(directory, "gpt_block.onnx"))
    export(Layers(), (torch.randn(2, 8, 32), torch.randn(2, 8, 32)),
           os.path.join(directory, "layers.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
