"""Small stand-ins for libraries the fake-GPU tests do not install, with the
behaviour the fixtures rely on: a tokenizer whose ``return_tensors="pt"``
result is a ``BatchEncoding``-like dict of CPU tensors (moved whole with
``.to(device)``, read by key or attribute), and a tiny language model with
``forward(input_ids, attention_mask=None)`` and ``generate``. The fixtures'
``run.toml`` names them in their arguments (``"Tokenizer()"``)."""

from __future__ import annotations

import torch
import torch.nn as nn


class Encoding(dict):
    """As ``transformers.BatchEncoding``: a dict of tensors that moves its tensors with ``.to``."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device):
        for key, value in self.items():
            if isinstance(value, torch.Tensor):
                self[key] = value.to(device)
        return self


class Tokenizer:
    """Words to ids (a word's length, modulo the vocabulary), padded with 0."""

    vocabulary = 10

    def __call__(self, texts, return_tensors=None, **options):
        rows = [[len(word) % self.vocabulary for word in text.split()] for text in ([texts] if isinstance(texts, str) else texts)]
        width = max(len(row) for row in rows)
        ids = torch.tensor([row + [0] * (width - len(row)) for row in rows])
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
        return Encoding(input_ids=ids, attention_mask=mask)

    def encode(self, text, return_tensors=None):
        return self(text)["input_ids"]


class TinyLM(nn.Module):
    """Logits for every position; ``generate`` appends the likeliest tokens."""

    def __init__(self, vocabulary: int = Tokenizer.vocabulary):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, 8)
        self.head = nn.Linear(8, vocabulary)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        return self.head(hidden)

    def generate(self, input_ids, attention_mask=None, max_new_tokens=2):
        for _ in range(max_new_tokens):
            following = self(input_ids)[:, -1].argmax(-1, keepdim=True)
            input_ids = torch.cat([input_ids, following], dim=1)
        return input_ids


def names(fixture=None) -> dict:
    """What a ``run.toml`` argument may name: torch, nn, these stand-ins and,
    as ``fixture``, the fixture file being run (``fixture.Scorer()``)."""
    return {"torch": torch, "nn": nn, "fixture": fixture, "Tokenizer": Tokenizer, "TinyLM": TinyLM}
